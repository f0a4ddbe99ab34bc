//! Validation of the function under `#[starling::remote]`, and the shapes the generated code needs:
//! argument names and types, the task's value type, and the signature hash.
//!
//! A remote call crosses a process boundary, so every argument is serialized on the caller and
//! decoded on a worker. Anything that cannot survive that trip and is visible in tokens (generics,
//! `self`, references, lifetimes, `impl Trait`, patterns, `unsafe`, foreign ABIs) is refused here with
//! a message that says what to write instead. Serializability itself is not visible in tokens; the
//! generated `assert_remote_value` checks leave it to the compiler.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, ToTokens};
use syn::{
    Attribute, FnArg, GenericArgument, Ident, ItemFn, Lifetime, Pat, PatIdent, PathArguments,
    ReturnType, Type, TypeParamBound, Visibility,
};

use crate::hash;

const GENERIC: &str = "#[starling::remote] functions cannot be generic: write a non-generic \
                       wrapper that calls it with concrete types";

/// A function that passed validation.
pub(crate) struct RemoteFn {
    pub(crate) name: Ident,
    pub(crate) vis: Visibility,
    pub(crate) is_async: bool,
    pub(crate) args: Vec<Arg>,
    pub(crate) ret: Return,
    /// The return type as written, if any.
    pub(crate) output: Option<Type>,
    /// For a streaming function (it returns `impl Iterator<Item = T>` or `Generator<T>`, or a
    /// `Result` of one), the item type `T`.
    pub(crate) stream: Option<Type>,
    /// The function's `#[cfg(..)]` attributes, repeated on every generated item so that they
    /// vanish together with the function.
    pub(crate) cfgs: Vec<Attribute>,
}

/// One argument: the name the stubs use for it, and its type.
pub(crate) struct Arg {
    pub(crate) name: Ident,
    pub(crate) ty: Type,
}

/// What the function returns, seen from the task's side.
pub(crate) enum Return {
    /// No return type, or `()`: the task's value is `()`.
    Unit,
    /// A plain value: the task's value is this type.
    Value(Type),
    /// `Result<T, E>` or an alias spelled `..::Result<T>`: the task's value is `T`, and an `Err`
    /// fails the task.
    Result(Type),
}

impl Return {
    /// The `T` of the `ObjectRef<T>` a call returns.
    pub(crate) fn value_type(&self) -> TokenStream {
        match self {
            Return::Unit => quote!(()),
            Return::Value(ty) | Return::Result(ty) => ty.to_token_stream(),
        }
    }

    /// The type that must be a `RemoteValue`, with the user's span, if any is written.
    pub(crate) fn checked_type(&self) -> Option<&Type> {
        match self {
            Return::Unit => None,
            Return::Value(ty) | Return::Result(ty) => Some(ty),
        }
    }
}

impl RemoteFn {
    /// The canonical signature, such as `async fn(i64, Vec<u8>) -> Result<u64, String>`: argument
    /// types, return type and asyncness, but no names, since renaming an argument or the function's
    /// module changes nothing on the wire (the module is in the registered name already).
    pub(crate) fn signature(&self) -> String {
        let args: Vec<String> = self.args.iter().map(|a| hash::canonical(&a.ty)).collect();
        let ret = match (&self.ret, &self.output) {
            (Return::Unit, _) | (_, None) => "()".to_owned(),
            (_, Some(ty)) => hash::canonical(ty),
        };
        let asyncness = if self.is_async { "async " } else { "" };
        format!("{asyncness}fn({}) -> {ret}", args.join(", "))
    }

    /// The hash that makes a function's registered name change with its signature.
    pub(crate) fn signature_hash(&self) -> u64 {
        hash::fnv1a64(self.signature().as_bytes())
    }
}

/// Collects every problem with a signature, so one build reports them all.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    /// Records an error covering `tokens`. `new_spanned` keeps the first and last token's spans,
    /// so the error underlines the whole construct on stable Rust, where spans cannot be joined.
    fn push(&mut self, tokens: impl ToTokens, message: impl std::fmt::Display) {
        self.add(syn::Error::new_spanned(tokens, message));
    }

    fn add(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }
}

/// Where a type appears, which decides how an error about it is worded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Position {
    Argument,
    Return,
    /// Inside another type, such as the `&str` in `Vec<&str>`.
    Nested,
}

/// Checks the function and extracts what the expansion needs.
pub(crate) fn analyze(item: &ItemFn) -> syn::Result<RemoteFn> {
    let sig = &item.sig;
    let mut errors = Errors::default();

    if let Some(token) = &sig.constness {
        errors.push(
            token,
            "#[starling::remote] functions cannot be `const fn`: a remote call happens at run \
             time; remove `const`, or call the `const fn` from a plain wrapper",
        );
    }
    if let Some(token) = &sig.unsafety {
        errors.push(
            token,
            "#[starling::remote] functions cannot be `unsafe`: a remote caller cannot uphold a \
             safety contract; make the function safe, or call it from a safe wrapper",
        );
    }
    if let Some(abi) = &sig.abi {
        errors.push(
            abi,
            "#[starling::remote] functions cannot have an `extern` ABI: remove `extern \"..\"`, \
             or call the extern function from a plain Rust wrapper",
        );
    }
    if !sig.generics.params.is_empty() {
        errors.push(&sig.generics, GENERIC);
    }
    if let Some(clause) = &sig.generics.where_clause {
        errors.push(clause, GENERIC);
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(
            variadic,
            "#[starling::remote] functions cannot be variadic: take the values as a `Vec<T>`",
        );
    }

    let mut args = Vec::with_capacity(sig.inputs.len());
    for (index, input) in sig.inputs.iter().enumerate() {
        match input {
            FnArg::Receiver(receiver) => errors.push(
                receiver,
                "#[starling::remote] cannot be used on methods: `self` cannot be sent to a \
                 worker; write a free function that takes the value as an argument",
            ),
            FnArg::Typed(typed) => {
                check_type(&typed.ty, Position::Argument, &mut errors);
                let name = match &*typed.pat {
                    Pat::Ident(PatIdent {
                        by_ref: None,
                        subpat: None,
                        ident,
                        ..
                    }) => ident.clone(),
                    // An ignored argument is still sent; it only needs a name in the stubs.
                    Pat::Wild(_) => format_ident!("__arg{}", index),
                    pat => {
                        errors.push(
                            pat,
                            "#[starling::remote] arguments must be plain names (`name: Type`): \
                             take the value whole and destructure it in the body, e.g. \
                             `pair: (i32, i32)` then `let (a, b) = pair;`",
                        );
                        continue;
                    }
                };
                args.push(Arg {
                    name,
                    ty: (*typed.ty).clone(),
                });
            }
        }
    }

    let mut stream = None;
    let ret = match &sig.output {
        ReturnType::Default => Return::Unit,
        ReturnType::Type(_, ty) => match classify_return(ty) {
            // Only the success type is serialized; the error type of a `Result` only needs
            // `Display` (it travels as text), so `Result<T, &'static str>` is fine.
            Ok(Return::Result(ok)) => {
                stream = stream_item(&ok);
                check_type(
                    stream.as_ref().unwrap_or(&ok),
                    Position::Return,
                    &mut errors,
                );
                Return::Result(ok)
            }
            Ok(ret) => {
                stream = stream_item(ty);
                check_type(stream.as_ref().unwrap_or(ty), Position::Return, &mut errors);
                ret
            }
            Err(e) => {
                errors.add(e);
                Return::Unit
            }
        },
    };

    if let Some(error) = errors.0 {
        return Err(error);
    }
    Ok(RemoteFn {
        name: sig.ident.clone(),
        vis: item.vis.clone(),
        is_async: sig.asyncness.is_some(),
        args,
        ret,
        output: match &sig.output {
            ReturnType::Default => None,
            ReturnType::Type(_, ty) => Some((**ty).clone()),
        },
        stream,
        cfgs: item
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("cfg"))
            .cloned()
            .collect(),
    })
}

/// Sees through parentheses and the invisible groups `macro_rules!` wraps fragments in.
fn peel(ty: &Type) -> &Type {
    match ty {
        Type::Paren(p) => peel(&p.elem),
        Type::Group(g) => peel(&g.elem),
        ty => ty,
    }
}

/// The item type of a streaming function's return type: `T` of `impl Iterator<Item = T>` (with
/// any other bounds) or of `Generator<T>` (any path ending so); `None` for any other type.
pub(crate) fn stream_item(ty: &Type) -> Option<Type> {
    let item_of = |args: &PathArguments| match args {
        PathArguments::AngleBracketed(args) => args.args.iter().find_map(|arg| match arg {
            GenericArgument::AssocType(assoc) if assoc.ident == "Item" => Some(assoc.ty.clone()),
            _ => None,
        }),
        _ => None,
    };
    match peel(ty) {
        Type::ImplTrait(impl_trait) => impl_trait.bounds.iter().find_map(|bound| match bound {
            TypeParamBound::Trait(t) => {
                let last = t.path.segments.last()?;
                (last.ident == "Iterator").then(|| item_of(&last.arguments))?
            }
            _ => None,
        }),
        Type::Path(path) if path.qself.is_none() => {
            let last = path.path.segments.last()?;
            if last.ident != "Generator" {
                return None;
            }
            match &last.arguments {
                PathArguments::AngleBracketed(args) if args.args.len() == 1 => {
                    match args.args.first() {
                        Some(GenericArgument::Type(item)) => Some(item.clone()),
                        _ => None,
                    }
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Tells a unit, a `Result` and a plain return type apart. A return type is a `Result` when the
/// last segment of its path is `Result`; its first generic argument is then the task's value type.
/// That catches `Result<T, E>`, `std::result::Result<T, E>`, `io::Result<T>` and `anyhow::Result<T>`,
/// which is as far as tokens can see: an alias with another name is treated as a plain value.
pub(crate) fn classify_return(ty: &Type) -> syn::Result<Return> {
    match peel(ty) {
        Type::Tuple(tuple) if tuple.elems.is_empty() => Ok(Return::Unit),
        Type::Never(never) => Err(syn::Error::new_spanned(
            never,
            "#[starling::remote] functions must return a value: a task that never returns has \
             no result to store; return `()` instead",
        )),
        Type::Path(path) if path.qself.is_none() => {
            let last = path
                .path
                .segments
                .last()
                .expect("a path has at least one segment");
            if last.ident != "Result" {
                return Ok(Return::Value(ty.clone()));
            }
            let first = match &last.arguments {
                PathArguments::AngleBracketed(args) => args.args.first(),
                _ => None,
            };
            match first {
                Some(GenericArgument::Type(ok)) => Ok(Return::Result(ok.clone())),
                _ => Err(syn::Error::new_spanned(
                    last,
                    "#[starling::remote] cannot see the success type of this `Result`: spell \
                     it out, e.g. `Result<(), std::fmt::Error>` instead of `fmt::Result`",
                )),
            }
        }
        _ => Ok(Return::Value(ty.clone())),
    }
}

/// Refuses what tokens show cannot be serialized and decoded: references, non-`'static`
/// lifetimes and `impl Trait`.
fn check_type(ty: &Type, position: Position, errors: &mut Errors) {
    match ty {
        Type::Reference(reference) => {
            let owned = owned_suggestion(&reference.elem);
            let message = match position {
                Position::Argument => format!(
                    "#[starling::remote] arguments cannot be references: take the argument by \
                     value (`{owned}`), remote arguments are serialized"
                ),
                Position::Return => format!(
                    "#[starling::remote] functions cannot return references: return an owned \
                     value (`{owned}`), results are serialized"
                ),
                Position::Nested => format!(
                    "#[starling::remote] types cannot contain references: use an owned type \
                     (`{owned}`), values are serialized and sent to another process"
                ),
            };
            errors.push(reference, message);
        }
        Type::ImplTrait(impl_trait) => {
            let message = match position {
                Position::Return => {
                    "#[starling::remote] functions cannot return `impl Trait`: name a concrete \
                     type, because the caller decodes the result into it"
                }
                _ => {
                    "#[starling::remote] arguments cannot be `impl Trait`: name a concrete type, \
                     because the worker decodes the argument into it"
                }
            };
            errors.push(impl_trait, message);
        }
        Type::Path(path) => {
            if let Some(qself) = &path.qself {
                check_type(&qself.ty, Position::Nested, errors);
            }
            for segment in &path.path.segments {
                match &segment.arguments {
                    PathArguments::None => {}
                    PathArguments::AngleBracketed(args) => {
                        for arg in &args.args {
                            match arg {
                                GenericArgument::Lifetime(lifetime) => {
                                    check_lifetime(lifetime, errors)
                                }
                                GenericArgument::Type(ty) => {
                                    check_type(ty, Position::Nested, errors)
                                }
                                GenericArgument::AssocType(assoc) => {
                                    check_type(&assoc.ty, Position::Nested, errors)
                                }
                                _ => {}
                            }
                        }
                    }
                    PathArguments::Parenthesized(args) => {
                        for input in &args.inputs {
                            check_type(input, Position::Nested, errors);
                        }
                        if let ReturnType::Type(_, output) = &args.output {
                            check_type(output, Position::Nested, errors);
                        }
                    }
                }
            }
        }
        Type::TraitObject(object) => {
            for bound in &object.bounds {
                if let TypeParamBound::Lifetime(lifetime) = bound {
                    check_lifetime(lifetime, errors);
                }
            }
        }
        Type::Array(array) => check_type(&array.elem, Position::Nested, errors),
        Type::Slice(slice) => check_type(&slice.elem, Position::Nested, errors),
        Type::Ptr(ptr) => check_type(&ptr.elem, Position::Nested, errors),
        Type::Tuple(tuple) => {
            for elem in &tuple.elems {
                check_type(elem, Position::Nested, errors);
            }
        }
        // Parentheses and invisible groups change nothing about where the type is.
        Type::Paren(paren) => check_type(&paren.elem, position, errors),
        Type::Group(group) => check_type(&group.elem, position, errors),
        // Function pointers, macros and the rest are left to the `RemoteValue` check.
        _ => {}
    }
}

fn check_lifetime(lifetime: &Lifetime, errors: &mut Errors) {
    // `'static` data is owned (`Cow<'static, str>` deserializes into an owned value), so only
    // borrowed lifetimes are refused.
    if lifetime.ident != "static" {
        errors.push(
            lifetime,
            format!(
                "#[starling::remote] types cannot borrow (`{lifetime}`): use owned types such as \
                 `String` and `Vec<T>`, values are serialized and sent to another process"
            ),
        );
    }
}

/// The owned type to suggest instead of `&T`: `String` for `str`, `Vec<T>` for `[T]`,
/// `PathBuf` for `Path`, otherwise `T` itself.
fn owned_suggestion(elem: &Type) -> String {
    match peel(elem) {
        Type::Path(path) if path.qself.is_none() && path.path.is_ident("str") => "String".into(),
        Type::Path(path) if path.qself.is_none() && path.path.is_ident("Path") => "PathBuf".into(),
        Type::Slice(slice) => format!("Vec<{}>", hash::canonical(&slice.elem)),
        elem => hash::canonical(elem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyze_str(src: &str) -> syn::Result<RemoteFn> {
        analyze(&syn::parse_str::<ItemFn>(src).unwrap())
    }

    fn error(src: &str) -> String {
        match analyze_str(src) {
            Ok(_) => panic!("`{src}` was accepted"),
            Err(e) => e
                .into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    fn value_type(ret: &str) -> Option<String> {
        match classify_return(&syn::parse_str(ret).unwrap()).unwrap() {
            Return::Unit => None,
            Return::Value(ty) => Some(format!("value {}", hash::canonical(&ty))),
            Return::Result(ok) => Some(format!("ok {}", hash::canonical(&ok))),
        }
    }

    #[test]
    fn result_detection_uses_the_last_segment() {
        assert_eq!(value_type("Result<u64, String>").unwrap(), "ok u64");
        assert_eq!(
            value_type("std::result::Result<Vec<u8>, E>").unwrap(),
            "ok Vec<u8>"
        );
        assert_eq!(value_type("std::io::Result<u64>").unwrap(), "ok u64");
        assert_eq!(value_type("anyhow::Result<()>").unwrap(), "ok ()");
        assert_eq!(value_type("(Result<u8, u8>)").unwrap(), "ok u8");
        assert_eq!(value_type("Res<u64>").unwrap(), "value Res<u64>");
        assert_eq!(
            value_type("Option<Result<u8, u8>>").unwrap(),
            "value Option<Result<u8, u8>>"
        );
        assert_eq!(value_type("ResultSet").unwrap(), "value ResultSet");
        assert_eq!(value_type("()"), None);
        assert!(classify_return(&syn::parse_str("fmt::Result").unwrap()).is_err());
    }

    #[test]
    fn accepts_plain_functions() {
        let f =
            analyze_str("pub async fn f(mut a: i64, _: String) -> Result<u8, E> { a }").unwrap();
        assert!(f.is_async);
        assert_eq!(f.args[0].name, "a");
        assert_eq!(f.args[1].name, "__arg1");
        assert_eq!(f.signature(), "async fn(i64, String) -> Result<u8, E>");
        assert_eq!(f.ret.value_type().to_string(), "u8");
        assert!(analyze_str("fn f(c: std::borrow::Cow<'static, str>) {}").is_ok());
        assert!(analyze_str("fn f() -> Result<u8, &'static str> { Ok(1) }").is_ok());
    }

    #[test]
    fn unit_returns_hash_alike() {
        let a = analyze_str("fn f(x: u8) {}").unwrap();
        let b = analyze_str("fn f(x: u8) -> () {}").unwrap();
        assert_eq!(a.signature(), "fn(u8) -> ()");
        assert_eq!(a.signature_hash(), b.signature_hash());
    }

    #[test]
    fn hash_is_stable_across_whitespace_and_names() {
        let a =
            analyze_str("fn add(a: i64, b: Vec<Vec<u8>>) -> Result<i64, String> { 0 }").unwrap();
        let b = analyze_str(
            "fn add ( x : i64 ,\n  y : Vec < Vec < u8 > > , )\n -> Result< i64 ,String > { 1 }",
        )
        .unwrap();
        assert_eq!(a.signature_hash(), b.signature_hash());
        // The exact value is part of every registered name, so it is pinned.
        assert_eq!(
            a.signature(),
            "fn(i64, Vec<Vec<u8>>) -> Result<i64, String>"
        );
        assert_eq!(a.signature_hash(), hash::fnv1a64(a.signature().as_bytes()));
        let add = analyze_str("fn add(a: i64, b: i64) -> i64 { a + b }").unwrap();
        assert_eq!(format!("{:016x}", add.signature_hash()), "2b77b8d30deadbfe");
    }

    #[test]
    fn hash_changes_with_the_signature() {
        let base = analyze_str("fn f(a: i64) -> i64 { a }")
            .unwrap()
            .signature_hash();
        for other in [
            "async fn f(a: i64) -> i64 { a }",
            "fn f(a: i32) -> i64 { a }",
            "fn f(a: i64) -> u64 { a }",
            "fn f(a: i64, b: i64) -> i64 { a }",
        ] {
            assert_ne!(
                analyze_str(other).unwrap().signature_hash(),
                base,
                "{other}"
            );
        }
    }

    #[test]
    fn refuses_what_cannot_cross_a_process() {
        assert!(error("fn f<T>(a: T) {}").contains("cannot be generic"));
        assert!(error("fn f(a: u8) where u8: Copy {}").contains("cannot be generic"));
        assert!(error("fn f(&self) {}").contains("cannot be used on methods"));
        assert!(error("fn f(a: &str) {}").contains("take the argument by value (`String`)"));
        assert!(error("fn f(a: &mut [u8]) {}").contains("by value (`Vec<u8>`)"));
        assert!(error("fn f(a: Vec<&str>) {}").contains("cannot contain references"));
        assert!(error("fn f() -> &'static str {}").contains("cannot return references"));
        assert!(error("fn f() -> Result<&'static str, E> {}").contains("cannot return references"));
        assert!(error("fn f(a: Cow<'a, str>) {}").contains("cannot borrow (`'a`)"));
        assert!(error("fn f(a: impl Into<u8>) {}").contains("arguments cannot be `impl Trait`"));
        assert!(error("fn f() -> impl Into<u8> {}").contains("cannot return `impl Trait`"));
        assert!(error("fn f((a, b): (i32, i32)) {}").contains("must be plain names"));
        assert!(error("fn f(ref a: i32) {}").contains("must be plain names"));
        assert!(error("unsafe fn f() {}").contains("cannot be `unsafe`"));
        assert!(error("extern \"C\" fn f() {}").contains("cannot have an `extern` ABI"));
        assert!(error("const fn f() {}").contains("cannot be `const fn`"));
        assert!(error("fn f() -> ! {}").contains("must return a value"));
    }

    #[test]
    fn reports_every_problem_at_once() {
        let e = error("fn f(a: &u8, (b, c): (u8, u8)) -> impl Copy {}");
        assert_eq!(e.lines().count(), 3, "{e}");
    }
}
