//! `#[starling::job]`: a function that runs as a multi-node job.
//!
//! For `#[starling::job(pool = "train", target_instances = 3)] fn fit(x: Data) -> Model` it
//! emits, beside the untouched function:
//!
//! ```text
//! struct fit {}
//! impl fit {
//!     const NAME: &str;                  // "<module path>::fit#<signature hash>"
//!     const POOL: &str;                  // "train"
//!     fn options() -> JobOptions;        // target_instances(3), seeded from the attribute
//!     fn submit(&JobClient, x: Data) -> starling::Result<Job>;
//!     fn submit_with(&JobClient, pool: &str, JobOptions, x: Data) -> starling::Result<Job>;
//!     fn __invoke(&[&[u8]]) -> Result<Vec<u8>, InvokeError>;   // what job mode runs
//! }
//! #[distributed_slice(JOB_FUNCTIONS)] static _: Registration = Registration::new(fit::NAME, fit::__invoke);
//! ```
//!
//! The function's signature is checked and hashed exactly as `#[starling::remote]` does (see
//! [`crate::signature`]); its arguments travel as the job's input, and its value or error comes
//! back through `Job::result::<Model>()`.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, Ident, ItemFn, Lit, Token};

use crate::expand::{invoker, type_checks, with_item};
use crate::options::{assigned_value, duplicate, is_negated_literal, literal, unknown_option};
use crate::signature::{self, RemoteFn};

/// The option names, in the order the error message lists them.
const KNOWN_OPTIONS: &[&str] = &[
    "pool",
    "target_instances",
    "min_instances",
    "instance_timeout_secs",
    "name",
];

/// The attribute's options.
#[derive(Default)]
pub(crate) struct JobOptions {
    pool: Option<Expr>,
    target_instances: Option<Count>,
    min_instances: Option<Count>,
    instance_timeout_secs: Option<Count>,
    name: Option<Expr>,
}

/// A whole number: a literal checked here, or an expression left to the compiler.
enum Count {
    Lit(u64, Expr),
    Expr(Expr),
}

impl Count {
    fn lit(&self) -> Option<u64> {
        match self {
            Count::Lit(n, _) => Some(*n),
            Count::Expr(_) => None,
        }
    }

    fn expr(&self) -> &Expr {
        match self {
            Count::Lit(_, e) | Count::Expr(e) => e,
        }
    }
}

impl Parse for JobOptions {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut options = JobOptions::default();
        while !input.is_empty() {
            let name: Ident = input.call(Ident::parse_any)?;
            let key = name.to_string();
            if !KNOWN_OPTIONS.contains(&key.as_str()) {
                return Err(unknown_option("job", &name, KNOWN_OPTIONS));
            }
            let value = assigned_value(input, &name)?;
            let seen = match key.as_str() {
                "pool" => options.pool.replace(text(&key, value)?).is_some(),
                "name" => options.name.replace(text(&key, value)?).is_some(),
                "target_instances" => options
                    .target_instances
                    .replace(count(&key, value)?)
                    .is_some(),
                "min_instances" => options.min_instances.replace(count(&key, value)?).is_some(),
                "instance_timeout_secs" => options
                    .instance_timeout_secs
                    .replace(count(&key, value)?)
                    .is_some(),
                _ => unreachable!("every known option has a parser"),
            };
            if seen {
                return Err(duplicate(&name));
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        options.check(input.span())?;
        Ok(options)
    }
}

impl JobOptions {
    /// What can be checked on literals: a pool is named, `1 <= min <= target`.
    fn check(&self, span: Span) -> syn::Result<()> {
        if self.pool.is_none() {
            return Err(syn::Error::new(
                span,
                "#[starling::job] needs the pool to run in: `#[starling::job(pool = \"NAME\")]`",
            ));
        }
        if let Some(Count::Lit(0, e)) = &self.target_instances {
            return Err(syn::Error::new_spanned(
                e,
                "`target_instances` must be at least 1",
            ));
        }
        if let Some(Count::Lit(m, e)) = &self.min_instances {
            let target = self.target_instances.as_ref().map_or(Some(1), Count::lit);
            if *m == 0 || target.is_some_and(|t| *m > t) {
                let target = target.map_or("target_instances".to_string(), |t| t.to_string());
                return Err(syn::Error::new_spanned(
                    e,
                    format!("`min_instances` must be in 1..={target} (target_instances)"),
                ));
            }
        }
        for c in [&self.target_instances, &self.min_instances] {
            if let Some(Count::Lit(n, e)) = c {
                if *n > u64::from(u32::MAX) {
                    return Err(syn::Error::new_spanned(e, "this count must fit in a `u32`"));
                }
            }
        }
        Ok(())
    }

    /// `JobOptions::new()` turned into the attribute's defaults.
    fn builder_calls(&self) -> TokenStream {
        let mut calls = TokenStream::new();
        if let Some(c) = &self.target_instances {
            let e = c.expr();
            calls.extend(quote!(.target_instances(#e)));
        }
        if let Some(c) = &self.min_instances {
            let e = c.expr();
            calls.extend(quote!(.min_instances(#e)));
        }
        if let Some(c) = &self.instance_timeout_secs {
            let e = c.expr();
            calls.extend(quote!(.instance_timeout(::std::time::Duration::from_secs(#e))));
        }
        if let Some(e) = &self.name {
            calls.extend(quote!(.name(#e)));
        }
        calls
    }
}

/// A string: a literal, or an expression (a `const`) left to the compiler.
fn text(what: &str, value: Expr) -> syn::Result<Expr> {
    match literal(&value) {
        Some(Lit::Str(s)) if s.value().is_empty() => Err(syn::Error::new_spanned(
            &value,
            format!("`{what}` cannot be empty"),
        )),
        Some(Lit::Str(_)) | None => Ok(value),
        Some(_) => Err(syn::Error::new_spanned(
            &value,
            format!("`{what}` expects a string, like `{what} = \"train\"`"),
        )),
    }
}

/// A whole number.
fn count(what: &str, value: Expr) -> syn::Result<Count> {
    match literal(&value) {
        Some(Lit::Int(i)) => match i.base10_parse::<u64>() {
            Ok(n) => Ok(Count::Lit(n, value)),
            Err(e) => Err(syn::Error::new_spanned(&value, e)),
        },
        Some(_) => Err(syn::Error::new_spanned(
            &value,
            format!("`{what}` expects a whole number, like `{what} = 2`"),
        )),
        None if is_negated_literal(&value) => Err(syn::Error::new_spanned(
            &value,
            format!("`{what}` cannot be negative"),
        )),
        None => Ok(Count::Expr(value)),
    }
}

/// Entry point: parses, validates and expands, turning any problem into `compile_error!`.
pub(crate) fn job(attr: TokenStream, item: TokenStream) -> TokenStream {
    let function: ItemFn = match syn::parse2(item.clone()) {
        Ok(function) => function,
        Err(_) => {
            let error = syn::Error::new(
                Span::call_site(),
                "#[starling::job] goes on a free function with a body: \
                 `fn name(args) -> T { .. }` or `async fn`",
            );
            return with_item(error, item);
        }
    };
    let options = syn::parse2::<JobOptions>(attr);
    // The signature rules are `#[remote]`'s; the messages name this attribute.
    let analyzed = signature::analyze(&function).map_err(|errors| {
        errors
            .into_iter()
            .map(|e| {
                let message = e
                    .to_string()
                    .replace("#[starling::remote]", "#[starling::job]");
                syn::Error::new(e.span(), message)
            })
            .reduce(|mut a, b| {
                a.combine(b);
                a
            })
            .expect("an error has at least one message")
    });
    match (options, analyzed) {
        (Ok(_), Ok(analyzed)) if analyzed.stream.is_some() => {
            let error = syn::Error::new_spanned(
                analyzed.output.as_ref(),
                "#[starling::job] functions return one value, not an iterator: collect the \
                 items (`.collect::<Vec<_>>()`), or submit a streaming #[starling::remote] \
                 function from the job",
            );
            with_item(error, item)
        }
        (Ok(options), Ok(analyzed)) => expand(&function, &analyzed, &options),
        (Err(mut a), Err(b)) => {
            a.combine(b);
            with_item(a, item)
        }
        (Err(e), _) | (_, Err(e)) => with_item(e, item),
    }
}

fn expand(function: &ItemFn, f: &RemoteFn, options: &JobOptions) -> TokenStream {
    let RemoteFn {
        name, vis, cfgs, ..
    } = f;
    let name_str = IdentExt::unraw(name).to_string();
    let hash = format!("{:016x}", f.signature_hash());
    let signature = f.signature();
    let pool = options.pool.as_ref().expect("checked at parse");
    let defaults = options.builder_calls();
    let value_type = f.ret.value_type();

    let params: Vec<TokenStream> = f
        .args
        .iter()
        .map(|arg| {
            let (arg_name, ty) = (&arg.name, &arg.ty);
            quote!(#arg_name: #ty)
        })
        .collect();
    let param_names: Vec<&Ident> = f.args.iter().map(|arg| &arg.name).collect();
    let input = Ident::new("input", Span::mixed_site());
    let count = f.args.len();
    let pushes = f.args.iter().map(|arg| {
        let (arg_name, ty) = (&arg.name, &arg.ty);
        quote!(#input.push::<#ty>(&#arg_name)?;)
    });
    let input_binding = if count == 0 {
        quote!(#input)
    } else {
        quote!(mut #input)
    };
    let checks = type_checks(f);
    let args = Ident::new("args", Span::mixed_site());
    let invoke = invoker(f, &args, &checks, None);

    let struct_doc = format!(
        " Job stub of the function `{name_str}`, generated by `#[starling::job]`.\n\n \
         `{name_str}::submit(&client, ..)` runs the function as a multi-node job: this executable \
         is the payload, instance 0 calls the function with the arguments, and \
         `job.result::<{value}>()` returns what it returned. `{name_str}(..)` still calls the \
         function directly.\n\n Registered signature: `{signature}`.",
        value = value_type.to_string().replace(' ', "")
    );

    quote! {
        #function

        #(#cfgs)*
        #[doc = #struct_doc]
        #[allow(non_camel_case_types, dead_code, clippy::empty_structs_with_brackets)]
        #vis struct #name {}

        #(#cfgs)*
        #[allow(dead_code, clippy::too_many_arguments)]
        impl #name {
            /// The name this job function is registered under: module path, name and a hash of
            /// the signature.
            pub const NAME: &'static str =
                ::core::concat!(::core::module_path!(), "::", #name_str, "#", #hash);

            /// The pool the attribute names.
            pub const POOL: &'static str = #pool;

            /// The job options the attribute sets, to change before
            /// [`submit_with`](Self::submit_with).
            pub fn options() -> ::starling::jobs::JobOptions {
                ::starling::jobs::JobOptions::new() #defaults
            }

            /// Submits a run of the function to [`POOL`](Self::POOL) with the attribute's
            /// options; the job's `result` is its value.
            pub fn submit(
                client: &::starling::jobs::JobClient,
                #(#params),*
            ) -> ::starling::Result<::starling::jobs::Job> {
                Self::submit_with(client, Self::POOL, Self::options(), #(#param_names),*)
            }

            /// Submits a run of the function to `pool` with `options`.
            pub fn submit_with(
                client: &::starling::jobs::JobClient,
                pool: &str,
                options: ::starling::jobs::JobOptions,
                #(#params),*
            ) -> ::starling::Result<::starling::jobs::Job> {
                #checks
                let #input_binding = ::starling::__private::JobInput::with_capacity(#count);
                #(#pushes)*
                ::starling::__private::submit_job(client, Self::NAME, #input, pool, options)
            }

            #invoke
        }

        #(#cfgs)*
        const _: () = {
            #[::starling::__private::linkme::distributed_slice(
                ::starling::__private::JOB_FUNCTIONS
            )]
            #[linkme(crate = ::starling::__private::linkme)]
            static REGISTRATION: ::starling::__private::Registration =
                ::starling::__private::Registration::new(#name::NAME, #name::__invoke);
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(src: &str) -> String {
        syn::parse_str::<JobOptions>(src)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn parses_every_option() {
        let o: JobOptions = syn::parse_str(
            r#"pool = "train", target_instances = 3, min_instances = 2,
               instance_timeout_secs = 60, name = "fit""#,
        )
        .unwrap();
        assert_eq!(o.target_instances.unwrap().lit(), Some(3));
        assert_eq!(o.min_instances.unwrap().lit(), Some(2));
        assert_eq!(o.instance_timeout_secs.unwrap().lit(), Some(60));
        assert!(o.pool.is_some() && o.name.is_some());
    }

    #[test]
    fn refuses_what_the_head_would_refuse() {
        assert!(error("target_instances = 2").contains("needs the pool"));
        assert!(error(r#"pool = "p", target_instances = 0"#).contains("at least 1"));
        assert!(
            error(r#"pool = "p", target_instances = 2, min_instances = 3"#)
                .contains("`min_instances` must be in 1..=2"),
        );
        assert!(error(r#"pool = "p", min_instances = 2"#).contains("1..=1"));
        assert!(error(r#"pool = "p", min_instances = 0"#).contains("1..="));
        assert!(error(r#"pool = """#).contains("cannot be empty"));
        assert!(error("pool = 3").contains("expects a string"));
        assert!(error(r#"pool = "p", target_instances = 1.5"#).contains("whole number"));
        assert!(error(r#"pool = "p", target_instances = -1"#).contains("negative"));
        assert!(error(r#"pool = "p", pool = "q""#).contains("given twice"));
        let e = error(r#"pool = "p", target_instance = 2"#);
        assert!(e.contains("did you mean `target_instances`?"), "{e}");
    }

    #[test]
    fn an_expression_is_left_to_the_compiler() {
        let o: JobOptions =
            syn::parse_str("pool = POOL, target_instances = N, min_instances = 2").unwrap();
        assert_eq!(o.target_instances.as_ref().unwrap().lit(), None);
        let calls = o.builder_calls().to_string();
        assert_eq!(calls, ". target_instances (N) . min_instances (2)");
    }
}
