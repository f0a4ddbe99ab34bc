//! A `Result<T, E>` return makes the task's value `T`; `E` only needs `Display`.

use std::fmt;

use starling::ObjectRef;

#[derive(Debug)]
struct ParseFailure(String);

impl fmt::Display for ParseFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot parse {:?}", self.0)
    }
}

#[starling::remote]
fn parse(text: String) -> Result<u64, ParseFailure> {
    text.parse().map_err(|_| ParseFailure(text))
}

#[starling::remote]
fn checked(x: u64) -> std::result::Result<Vec<u64>, String> {
    Ok(vec![x])
}

// The error only travels as its `Display` text, so it need not be serializable or owned.
#[starling::remote]
fn validate(x: i32) -> Result<i32, &'static str> {
    if x >= 0 {
        Ok(x)
    } else {
        Err("negative")
    }
}

#[starling::remote]
async fn parse_async(text: String) -> Result<i32, std::num::ParseIntError> {
    text.parse()
}

#[allow(dead_code)]
fn submit() {
    let n: ObjectRef<u64> = parse::remote("42".to_owned());
    let _v: ObjectRef<Vec<u64>> = checked::remote(&n);
    let i: ObjectRef<i32> = parse_async::remote("7".to_owned());
    let _j: ObjectRef<i32> = validate::remote(i);
}

fn main() {
    assert_eq!(parse("42".to_owned()).unwrap(), 42);
    assert!(parse("x".to_owned()).is_err());
}
