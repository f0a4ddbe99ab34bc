//! Parsing of the `#[starling::remote(..)]` options: the per-task defaults that
//! `f::options()` starts from.
//!
//! The grammar is `name = value` pairs plus `resources(key = value, ..)`, where a resource key is
//! an identifier or a string literal (resource names such as `"my-res"` are not identifiers).
//! Literal values are checked here, so a misspelt option or a value of the wrong type is an error on
//! the attribute that says what to write; any other expression (a `const`, a call) is passed to the
//! `TaskOptions` builder unchanged and type-checked by the compiler.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, ToTokens};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ExprUnary, Ident, Lit, LitStr, Token, UnOp};

/// The option names, in the order the error message lists them.
pub(crate) const KNOWN_OPTIONS: &[&str] = &[
    "num_cpus",
    "num_gpus",
    "resources",
    "max_retries",
    "retry_exceptions",
    "scheduling_strategy",
    "num_returns",
    "max_concurrency",
];

/// A checked option value: a literal the macro understood, or an expression left to the compiler.
#[derive(Debug, Clone)]
pub(crate) enum Value<T> {
    Lit(T, Span),
    Expr(Box<Expr>),
}

impl<T: PartialEq> Value<T> {
    /// The literal, for tests and for checks that only apply to literals.
    #[cfg(test)]
    pub(crate) fn lit(&self) -> Option<&T> {
        match self {
            Value::Lit(v, _) => Some(v),
            Value::Expr(_) => None,
        }
    }
}

impl ToTokens for Value<f64> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        match self {
            Value::Lit(v, span) => {
                // A suffixed literal keeps `num_gpus = 1` an `f64` without an `as` cast.
                let mut lit = Literal::f64_suffixed(*v);
                lit.set_span(*span);
                lit.to_tokens(tokens);
            }
            Value::Expr(e) => e.to_tokens(tokens),
        }
    }
}

impl ToTokens for Value<u32> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        match self {
            Value::Lit(v, span) => {
                let mut lit = Literal::u32_suffixed(*v);
                lit.set_span(*span);
                lit.to_tokens(tokens);
            }
            Value::Expr(e) => e.to_tokens(tokens),
        }
    }
}

impl ToTokens for Value<bool> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        match self {
            Value::Lit(v, span) => {
                Ident::new(if *v { "true" } else { "false" }, *span).to_tokens(tokens)
            }
            Value::Expr(e) => e.to_tokens(tokens),
        }
    }
}

/// Everything the attribute set. Absent options keep `TaskOptions::default()`'s values.
#[derive(Debug, Default)]
pub(crate) struct RemoteOptions {
    pub(crate) num_cpus: Option<Value<f64>>,
    pub(crate) num_gpus: Option<Value<f64>>,
    /// Custom resources in the order written; keys are unique.
    pub(crate) resources: Vec<(LitStr, Value<f64>)>,
    pub(crate) max_retries: Option<Value<u32>>,
    pub(crate) retry_exceptions: Option<Value<bool>>,
    /// `retry_exceptions = [Type, .., panic]`: the error types retried.
    pub(crate) retry_on: Vec<RetryOn>,
    pub(crate) scheduling_strategy: Option<Expr>,
    /// `num_returns = N`: the function returns an N-tuple, each element its own object.
    pub(crate) num_returns: Option<(u32, Span)>,
    /// `max_concurrency = N`: an async function's tasks, up to N at once on one worker.
    pub(crate) max_concurrency: Option<Value<u32>>,
}

/// One entry of `retry_exceptions = [..]`.
#[derive(Debug)]
pub(crate) enum RetryOn {
    /// A panic (`panic`).
    Panic,
    /// An `Err` of this type.
    Type(Box<syn::Type>),
}

impl RemoteOptions {
    /// The builder calls that turn `TaskOptions::default()` into these defaults,
    /// such as `.num_cpus(0.5f64).resources("tpu", 1f64)`.
    pub(crate) fn builder_calls(&self) -> TokenStream {
        let mut calls = TokenStream::new();
        if let Some(v) = &self.num_cpus {
            calls.extend(quote!(.num_cpus(#v)));
        }
        if let Some(v) = &self.num_gpus {
            calls.extend(quote!(.num_gpus(#v)));
        }
        for (key, v) in &self.resources {
            calls.extend(quote!(.resources(#key, #v)));
        }
        if let Some(v) = &self.max_retries {
            calls.extend(quote!(.max_retries(#v)));
        }
        if let Some(v) = &self.retry_exceptions {
            calls.extend(quote!(.retry_exceptions(#v)));
        }
        if let Some(v) = &self.max_concurrency {
            calls.extend(quote!(.max_concurrency(#v)));
        }
        for r in &self.retry_on {
            calls.extend(match r {
                RetryOn::Panic => quote!(.retry_on_panic()),
                RetryOn::Type(t) => quote!(.retry_on::<#t>()),
            });
        }
        if let Some(e) = &self.scheduling_strategy {
            calls.extend(quote!(.scheduling_strategy(#e)));
        }
        calls
    }
}

impl Parse for RemoteOptions {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut options = RemoteOptions::default();
        while !input.is_empty() {
            let name: Ident = input.call(Ident::parse_any)?;
            let key = name.to_string();
            if !KNOWN_OPTIONS.contains(&key.as_str()) {
                return Err(unknown_option("remote", &name, KNOWN_OPTIONS));
            }
            if key == "resources" {
                if !options.resources.is_empty() {
                    return Err(duplicate(&name));
                }
                if !input.peek(syn::token::Paren) {
                    return Err(syn::Error::new(
                        name.span(),
                        "write custom resources as `resources(name = amount, \"other-name\" = amount)`",
                    ));
                }
                let content;
                syn::parenthesized!(content in input);
                options.resources = parse_resources(&content)?;
                if options.resources.is_empty() {
                    return Err(syn::Error::new(
                        name.span(),
                        "`resources()` is empty: list at least one `name = amount`, or drop it",
                    ));
                }
            } else if key == "retry_exceptions"
                && input.peek(Token![=])
                && input.peek2(syn::token::Bracket)
            {
                input.parse::<Token![=]>()?;
                let content;
                syn::bracketed!(content in input);
                if !options.retry_on.is_empty() || options.retry_exceptions.is_some() {
                    return Err(duplicate(&name));
                }
                options.retry_on = retry_list(&name, &content)?;
            } else {
                let value = assigned_value(input, &name)?;
                let seen = match key.as_str() {
                    "num_cpus" => options.num_cpus.replace(amount(&key, value)?).is_some(),
                    "num_gpus" => options.num_gpus.replace(amount(&key, value)?).is_some(),
                    "max_retries" => options.max_retries.replace(count(&key, value)?).is_some(),
                    "retry_exceptions" => {
                        options
                            .retry_exceptions
                            .replace(flag(&key, value)?)
                            .is_some()
                            || !options.retry_on.is_empty()
                    }
                    "scheduling_strategy" => options
                        .scheduling_strategy
                        .replace(strategy(value)?)
                        .is_some(),
                    "num_returns" => options.num_returns.replace(returns(value)?).is_some(),
                    "max_concurrency" => options
                        .max_concurrency
                        .replace(count(&key, value)?)
                        .is_some(),
                    _ => unreachable!("every known option has a parser"),
                };
                if seen {
                    return Err(duplicate(&name));
                }
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(options)
    }
}

fn parse_resources(input: ParseStream<'_>) -> syn::Result<Vec<(LitStr, Value<f64>)>> {
    let mut resources: Vec<(LitStr, Value<f64>)> = Vec::new();
    while !input.is_empty() {
        let key = if input.peek(LitStr) {
            let key: LitStr = input.parse()?;
            if key.value().is_empty() {
                return Err(syn::Error::new(
                    key.span(),
                    "a resource name cannot be empty",
                ));
            }
            key
        } else if input.peek(syn::Ident::peek_any) {
            let ident: Ident = input.call(Ident::parse_any)?;
            let name = ident.unraw().to_string();
            LitStr::new(&name, ident.span())
        } else {
            return Err(input.error(
                "expected a resource name: an identifier (`tpu = 1`) or a string (`\"my-res\" = 1`)",
            ));
        };
        if resources.iter().any(|(k, _)| k.value() == key.value()) {
            return Err(syn::Error::new(
                key.span(),
                format!("resource `{}` is given twice", key.value()),
            ));
        }
        input.parse::<Token![=]>()?;
        let value = amount(&format!("resource `{}`", key.value()), input.parse()?)?;
        resources.push((key, value));
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(resources)
}

/// A non-negative amount of a resource (`f64`); integer literals are accepted and widened.
fn amount(what: &str, value: Expr) -> syn::Result<Value<f64>> {
    let number = match literal(&value) {
        Some(Lit::Float(f)) => f.base10_parse::<f64>()?,
        Some(Lit::Int(i)) => i.base10_parse::<f64>()?,
        Some(_) => {
            return Err(syn::Error::new_spanned(
                &value,
                format!("{what} expects a number of units, like `1` or `0.5`"),
            ))
        }
        None if is_negated_literal(&value) => {
            return Err(syn::Error::new_spanned(
                &value,
                format!("{what} cannot be negative: write `0` or more"),
            ))
        }
        None => return Ok(Value::Expr(Box::new(value))),
    };
    if !number.is_finite() {
        return Err(syn::Error::new_spanned(
            &value,
            format!("{what} must be a finite number"),
        ));
    }
    Ok(Value::Lit(number, value.span()))
}

/// A retry count (`u32`).
fn count(what: &str, value: Expr) -> syn::Result<Value<u32>> {
    match literal(&value) {
        Some(Lit::Int(i)) => match i.base10_parse::<u32>() {
            Ok(n) => Ok(Value::Lit(n, value.span())),
            Err(_) => Err(syn::Error::new_spanned(
                &value,
                format!("`{what}` must fit in a `u32` (0 to {})", u32::MAX),
            )),
        },
        Some(_) => Err(syn::Error::new_spanned(
            &value,
            format!("`{what}` expects a whole number of retries, like `{what} = 5`"),
        )),
        None if is_negated_literal(&value) => Err(syn::Error::new_spanned(
            &value,
            format!("`{what}` cannot be negative: write `0` to never retry, or a larger count"),
        )),
        None => Ok(Value::Expr(Box::new(value))),
    }
}

/// `num_returns`: a literal whole number from 1 to the protocol's limit (the stub's return type
/// depends on it, so it cannot be an expression).
fn returns(value: Expr) -> syn::Result<(u32, Span)> {
    const MAX: u32 = 4096;
    let n = match literal(&value) {
        Some(Lit::Int(i)) => i.base10_parse::<u32>().ok(),
        _ => None,
    };
    match n {
        Some(n) if (1..=MAX).contains(&n) => Ok((n, value.span())),
        _ => Err(syn::Error::new_spanned(
            &value,
            format!(
                "`num_returns` expects a whole number from 1 to {MAX} written out, like \
                 `num_returns = 2`, with the function returning a tuple of that many values"
            ),
        )),
    }
}

/// A `bool` switch.
fn flag(what: &str, value: Expr) -> syn::Result<Value<bool>> {
    match literal(&value) {
        Some(Lit::Bool(b)) => Ok(Value::Lit(b.value, value.span())),
        Some(_) => Err(syn::Error::new_spanned(
            &value,
            format!("`{what}` expects `true` or `false`"),
        )),
        None => Ok(Value::Expr(Box::new(value))),
    }
}

/// `retry_exceptions = [Type, .., panic]`: error types (and `panic`) to retry.
fn retry_list(name: &Ident, input: ParseStream<'_>) -> syn::Result<Vec<RetryOn>> {
    let types = syn::punctuated::Punctuated::<syn::Type, Token![,]>::parse_terminated(input)
        .map_err(|e| {
            syn::Error::new(
                e.span(),
                "`retry_exceptions` lists error types (and `panic`), like \
                 `[std::io::Error, panic]`",
            )
        })?;
    if types.is_empty() {
        return Err(syn::Error::new(
            name.span(),
            "`retry_exceptions = []` retries no error: write `retry_exceptions = false`, or \
             list the error types to retry, like `[std::io::Error, panic]`",
        ));
    }
    Ok(types
        .into_iter()
        .map(|t| match &t {
            syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("panic") => RetryOn::Panic,
            _ => RetryOn::Type(Box::new(t)),
        })
        .collect())
}

/// A `starling::SchedulingStrategy` expression; only literals can be refused here.
fn strategy(value: Expr) -> syn::Result<Expr> {
    if literal(&value).is_some() {
        return Err(syn::Error::new_spanned(
            &value,
            "`scheduling_strategy` expects a `starling::SchedulingStrategy`, \
             like `scheduling_strategy = starling::SchedulingStrategy::Spread`",
        ));
    }
    Ok(value)
}

pub(crate) fn literal(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(ExprLit { lit, .. }) => Some(lit),
        Expr::Group(g) => literal(&g.expr),
        Expr::Paren(p) => literal(&p.expr),
        _ => None,
    }
}

pub(crate) fn is_negated_literal(value: &Expr) -> bool {
    matches!(value, Expr::Unary(ExprUnary { op: UnOp::Neg(_), expr, .. }) if literal(expr).is_some())
}

/// The `= value` after option `name`, or an error that says how to write it.
pub(crate) fn assigned_value(input: ParseStream<'_>, name: &Ident) -> syn::Result<Expr> {
    if !input.peek(Token![=]) {
        return Err(syn::Error::new(
            name.span(),
            format!("write the option as `{name} = value`"),
        ));
    }
    input.parse::<Token![=]>()?;
    input.parse()
}

pub(crate) fn duplicate(name: &Ident) -> syn::Error {
    syn::Error::new(
        name.span(),
        format!("option `{name}` is given twice: keep one"),
    )
}

/// "unknown #[starling::<attribute>] option", with the closest known one suggested.
pub(crate) fn unknown_option(attribute: &str, name: &Ident, known: &[&str]) -> syn::Error {
    let list = known
        .iter()
        .map(|o| format!("`{o}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let key = name.to_string();
    let hint = known
        .iter()
        .map(|o| (edit_distance(&key, o), o))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, o)| format!(" (did you mean `{o}`?)"))
        .unwrap_or_default();
    syn::Error::new(
        name.span(),
        format!(
            "unknown #[starling::{attribute}] option `{key}`{hint}; the known options are {list}"
        ),
    )
}

/// Levenshtein distance, small enough for option names, to suggest the option meant.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> syn::Result<RemoteOptions> {
        syn::parse_str(src)
    }

    fn error(src: &str) -> String {
        parse(src).map(|_| ()).unwrap_err().to_string()
    }

    #[test]
    fn empty_attribute_keeps_defaults() {
        let o = parse("").unwrap();
        assert!(o.num_cpus.is_none() && o.resources.is_empty() && o.max_retries.is_none());
        assert!(o.builder_calls().is_empty());
    }

    #[test]
    fn parses_every_option() {
        let o = parse(
            r#"num_cpus = 0.5, num_gpus = 1, resources(tpu = 1.0, "my-res" = 2), max_retries = 5,
               retry_exceptions = true, scheduling_strategy = starling::SchedulingStrategy::Spread,"#,
        )
        .unwrap();
        assert_eq!(o.num_cpus.unwrap().lit(), Some(&0.5));
        assert_eq!(o.num_gpus.unwrap().lit(), Some(&1.0));
        let resources: Vec<_> = o
            .resources
            .iter()
            .map(|(k, v)| (k.value(), *v.lit().unwrap()))
            .collect();
        assert_eq!(
            resources,
            [("tpu".to_owned(), 1.0), ("my-res".to_owned(), 2.0)]
        );
        assert_eq!(o.max_retries.unwrap().lit(), Some(&5));
        assert_eq!(o.retry_exceptions.unwrap().lit(), Some(&true));
        assert!(o.scheduling_strategy.is_some());
    }

    #[test]
    fn retry_exceptions_takes_a_list_of_error_types() {
        let o = parse("retry_exceptions = [std::io::Error, panic, my::Error<u8>]").unwrap();
        assert_eq!(
            o.builder_calls().to_string(),
            ". retry_on :: < std :: io :: Error > () . retry_on_panic () \
             . retry_on :: < my :: Error < u8 > > ()"
        );
        assert!(error("retry_exceptions = []").contains("retries no error"));
        assert!(error("retry_exceptions = [1]").contains("lists error types"));
        assert!(error("retry_exceptions = [panic], retry_exceptions = true").contains("twice"));
    }

    #[test]
    fn builder_calls_widen_integers_to_f64() {
        let o = parse(r#"num_gpus = 1, resources("a" = 2), max_retries = 0"#).unwrap();
        assert_eq!(
            o.builder_calls().to_string(),
            r#". num_gpus (1f64) . resources ("a" , 2f64) . max_retries (0u32)"#
        );
    }

    #[test]
    fn expressions_pass_through() {
        let o = parse("num_cpus = CPUS, max_retries = retries(), retry_exceptions = FLAG").unwrap();
        assert!(matches!(o.num_cpus, Some(Value::Expr(_))));
        assert!(matches!(o.max_retries, Some(Value::Expr(_))));
        assert!(matches!(o.retry_exceptions, Some(Value::Expr(_))));
    }

    #[test]
    fn unknown_option_lists_known_ones_and_suggests() {
        let e = error("num_cpu = 1");
        assert!(
            e.contains("unknown #[starling::remote] option `num_cpu`"),
            "{e}"
        );
        assert!(e.contains("did you mean `num_cpus`?"), "{e}");
        assert!(
            e.contains("`num_cpus`, `num_gpus`, `resources`, `max_retries`"),
            "{e}"
        );
        assert!(!error("bogus = 1").contains("did you mean"));
    }

    #[test]
    fn wrong_value_types_say_what_to_write() {
        assert!(error(r#"num_cpus = "one""#).contains("expects a number of units"));
        assert!(error("num_gpus = -1").contains("cannot be negative"));
        assert!(error("max_retries = 1.5").contains("whole number"));
        assert!(error("max_retries = -1").contains("cannot be negative"));
        assert!(error("max_retries = 99999999999").contains("fit in a `u32`"));
        assert!(error("retry_exceptions = 1").contains("`true` or `false`"));
        assert!(error(r#"resources(tpu = "x")"#).contains("resource `tpu` expects a number"));
        assert!(error("scheduling_strategy = 1").contains("SchedulingStrategy"));
    }

    #[test]
    fn malformed_options_are_refused() {
        assert!(error("num_cpus = 1, num_cpus = 2").contains("given twice"));
        assert!(error("resources(a = 1, a = 2)").contains("resource `a` is given twice"));
        assert!(error(r#"resources("" = 1)"#).contains("cannot be empty"));
        assert!(error("resources()").contains("is empty"));
        assert!(error("resources = 1").contains("resources(name = amount"));
        assert!(error("num_cpus(1)").contains("`num_cpus = value`"));
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("num_cpus", "num_cpus"), 0);
        assert_eq!(edit_distance("num_cpu", "num_cpus"), 1);
        assert_eq!(edit_distance("max_retry", "max_retries"), 3);
    }
}
