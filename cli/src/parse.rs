//! Strict parsers for command-line values (resource amounts, `k=v` lists, byte sizes,
//! durations) and the few formatters the status report shares with them.
//!
//! Every parser returns a one-line message that names the offending input, because clap prints
//! it as is after `invalid value '<input>' for '--flag'`.

use std::time::Duration;

use starling_proto::RESOURCE_SCALE;

/// A resource amount: a finite, non-negative number (`2`, `0.5`, `1e3`).
pub fn amount(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}` is not a non-negative finite number"));
    }
    if v > 0.0 && v * (RESOURCE_SCALE as f64) < 0.5 {
        return Err(format!(
            "`{s}` is below the smallest resource unit (1/{RESOURCE_SCALE})"
        ));
    }
    Ok(v)
}

/// Custom resources from `--resources`: `name=amount` pairs separated by commas.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CustomResources(pub Vec<(String, f64)>);

/// Parses `k=v,k2=v2`: every entry a non-empty name of letters, digits, `_`, `-`, `.`, `:` or
/// `/`, then `=`, then an [`amount`]. Names are unique; `CPU` and `GPU` have their own flags.
pub fn resources(s: &str) -> Result<CustomResources, String> {
    if s.trim().is_empty() {
        return Err("expected `name=amount` pairs separated by commas, got nothing".into());
    }
    let mut out: Vec<(String, f64)> = Vec::new();
    for entry in s.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(format!("`{s}` has an empty entry (a stray comma?)"));
        }
        let (name, value) = entry
            .split_once('=')
            .ok_or_else(|| format!("`{entry}` is not a `name=amount` pair"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("`{entry}` has no resource name before `=`"));
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "_-.:/".contains(*c)))
        {
            return Err(format!(
                "resource name `{name}` contains `{bad}` (allowed: letters, digits, _ - . : /)"
            ));
        }
        if name.eq_ignore_ascii_case("cpu") || name.eq_ignore_ascii_case("gpu") {
            return Err(format!(
                "`{name}` has its own flag: use --num-{} instead",
                name.to_ascii_lowercase()
            ));
        }
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("resource `{name}` is given twice"));
        }
        let value = amount(value).map_err(|e| format!("resource `{name}`: {e}"))?;
        out.push((name.to_string(), value));
    }
    Ok(CustomResources(out))
}

/// A byte count: a whole number, optionally followed by `K`, `M`, `G` or `T` (powers of 1024;
/// `KiB`, `MiB`, .. and `B` are accepted too).
pub fn bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return Err(format!(
            "`{s}` is not a byte count (e.g. 1073741824, 512M, 2G)"
        ));
    }
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "`{other}` in `{s}` is not a size unit (use K, M, G or T)"
            ))
        }
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{s}` is too large"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// A duration in seconds (fractions allowed), at most a day.
pub fn seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > 86_400.0 {
        return Err(format!("`{s}` is not between 0 and 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// A resource amount in fixed-point units, as a short decimal (`2`, `0.5`).
pub fn units(u: u64) -> String {
    format!("{}", u as f64 / RESOURCE_SCALE as f64)
}

/// A byte count for people: `512 B`, `1.5 KiB`, `95.4 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", UNITS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts() {
        assert_eq!(amount("2"), Ok(2.0));
        assert_eq!(amount(" 0.5 "), Ok(0.5));
        assert_eq!(amount("0"), Ok(0.0));
        for bad in ["", "x", "-1", "NaN", "inf", "1e-9"] {
            assert!(amount(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn resource_lists() {
        assert_eq!(
            resources("foo=2,bar.baz=0.5").unwrap().0,
            vec![("foo".to_string(), 2.0), ("bar.baz".to_string(), 0.5)]
        );
        assert_eq!(resources(" a = 1 ").unwrap().0, vec![("a".into(), 1.0)]);
        for (bad, says) in [
            ("", "nothing"),
            ("a=1,", "empty entry"),
            ("a", "not a `name=amount`"),
            ("=1", "no resource name"),
            ("a b=1", "contains ` `"),
            ("a=x", "resource `a`: `x` is not a number"),
            ("a=-1", "non-negative"),
            ("a=1,a=2", "twice"),
            ("CPU=4", "--num-cpu"),
            ("gpu=1", "--num-gpu"),
        ] {
            let e = resources(bad).expect_err(bad);
            assert!(e.contains(says), "{bad:?}: {e:?} should say {says:?}");
        }
    }

    #[test]
    fn byte_counts() {
        assert_eq!(bytes("1024"), Ok(1024));
        assert_eq!(bytes("512M"), Ok(512 << 20));
        assert_eq!(bytes("2GiB"), Ok(2 << 30));
        assert_eq!(bytes("3 kb"), Ok(3 << 10));
        for bad in ["", "G", "1.5G", "12Q", "-1", "99999999999999999999"] {
            assert!(bytes(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(bytes("16777216T").unwrap_err().contains("too large"));
    }

    #[test]
    fn durations_and_formats() {
        assert_eq!(seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert!(seconds("0").is_err() && seconds("x").is_err() && seconds("1e9").is_err());
        assert_eq!(units(20_000), "2");
        assert_eq!(units(5_000), "0.5");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(100_000_000), "95.4 MiB");
    }
}
