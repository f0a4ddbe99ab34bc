//! The code `#[starling::remote]` writes next to the function.
//!
//! For `fn add(a: i64, b: i64) -> i64` it emits, beside the untouched function:
//!
//! ```text
//! struct add {}                       // type namespace only, so `add(..)` still calls the fn
//! impl add {
//!     const NAME: &str;               // "<module path>::add#<signature hash>"
//!     fn remote(a: impl IntoArg<i64>, b: impl IntoArg<i64>) -> ObjectRef<i64>;
//!     fn options() -> __starling_options_add;   // builder seeded with the attribute's options
//!     fn __invoke(&[&[u8]]) -> Result<Vec<u8>, InvokeError>;   // what a worker runs
//! }
//! struct __starling_options_add(TaskOptions);   // num_cpus(..), .., remote(..)
//! #[distributed_slice(REMOTE_FUNCTIONS)] static _: Registration = Registration::new(add::NAME, add::__invoke);
//! const _: fn() = || { assert_remote_value::<i64>(); .. };    // spanned at each type
//! ```
//!
//! Everything is reached through `::starling::..` paths, so the user's crate needs only the
//! `starling` dependency. Local variables use `Span::mixed_site()`, so a user argument or function
//! called `args` cannot capture or be captured by them.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, ItemFn};

use crate::options::RemoteOptions;
use crate::signature::{self, RemoteFn, Return};

/// Entry point: parses, validates and expands, turning any problem into `compile_error!`.
pub(crate) fn remote(attr: TokenStream, item: TokenStream) -> TokenStream {
    let function: ItemFn = match syn::parse2(item.clone()) {
        Ok(function) => function,
        Err(_) => {
            let error = syn::Error::new(
                Span::call_site(),
                "#[starling::remote] goes on a free function with a body: \
                 `fn name(args) -> T { .. }` or `async fn`",
            );
            // The item is kept so that the only error the user sees is this one.
            return with_item(error, item);
        }
    };
    let options = syn::parse2::<RemoteOptions>(attr);
    let analyzed = signature::analyze(&function);
    match (options, analyzed) {
        (Ok(options), Ok(analyzed)) => match check_concurrency(&analyzed, &options)
            .and_then(|()| returned_parts(&analyzed, &options))
        {
            Ok(parts) => expand(&function, &analyzed, &options, parts.as_deref()),
            Err(e) => with_item(e, item),
        },
        (Err(mut a), Err(b)) => {
            a.combine(b);
            with_item(a, item)
        }
        (Err(e), _) | (_, Err(e)) => with_item(e, item),
    }
}

/// Emits the errors followed by the original item, so the function body still type-checks and
/// its callers do not drown the real error in "cannot find function" noise.
pub(crate) fn with_item(error: syn::Error, item: TokenStream) -> TokenStream {
    let errors = error.to_compile_error();
    quote!(#errors #item)
}

/// `max_concurrency` is for `async` functions: their tasks interleave at `.await`s on one
/// thread. A streaming function may pause for its caller, so it runs alone.
fn check_concurrency(f: &RemoteFn, options: &RemoteOptions) -> syn::Result<()> {
    let Some(value) = &options.max_concurrency else {
        return Ok(());
    };
    let span = match value {
        crate::options::Value::Lit(_, span) => *span,
        crate::options::Value::Expr(e) => e.span(),
    };
    if !f.is_async {
        return Err(syn::Error::new(
            span,
            "`max_concurrency` needs an `async fn`: a worker runs several tasks at once by \
             interleaving them at their `.await`s; make the function `async`, or leave \
             `max_concurrency` out to run its tasks one at a time",
        ));
    }
    if f.stream.is_some() {
        return Err(syn::Error::new(
            span,
            "`max_concurrency` does not go with a function that returns an iterator: a \
             streaming task may pause until its caller takes items, so it runs alone",
        ));
    }
    Ok(())
}

/// With `num_returns = N` (N > 1), the types of the N values the function returns as a tuple;
/// `None` for a function with one return.
fn returned_parts(f: &RemoteFn, options: &RemoteOptions) -> syn::Result<Option<Vec<syn::Type>>> {
    let Some((n, span)) = options.num_returns.filter(|(n, _)| *n > 1) else {
        return Ok(None);
    };
    if f.stream.is_some() {
        return Err(syn::Error::new(
            span,
            format!(
                "`num_returns = {n}` does not go with a function that returns an iterator: \
                 each item it yields is already an object of its own"
            ),
        ));
    }
    let value = match &f.ret {
        Return::Value(ty) | Return::Result(ty) => Some(ty),
        Return::Unit => None,
    };
    let mut ty = value;
    while let Some(syn::Type::Paren(p)) = ty {
        ty = Some(&p.elem);
    }
    match ty {
        Some(syn::Type::Tuple(t)) if t.elems.len() == n as usize => {
            Ok(Some(t.elems.iter().cloned().collect()))
        }
        _ => {
            let returns = value.map_or("nothing".to_string(), |t| {
                format!("`{}`", quote::ToTokens::to_token_stream(t))
            });
            Err(syn::Error::new(
                span,
                format!(
                    "`num_returns = {n}` needs the function to return a tuple of {n} values, \
                     like `-> (A, B)` or `-> Result<(A, B), E>`; it returns {returns}"
                ),
            ))
        }
    }
}

fn expand(
    function: &ItemFn,
    f: &RemoteFn,
    options: &RemoteOptions,
    parts: Option<&[syn::Type]>,
) -> TokenStream {
    let RemoteFn {
        name, vis, cfgs, ..
    } = f;
    let name_str = syn::ext::IdentExt::unraw(name).to_string();
    let options_struct = format_ident!("__starling_options_{}", name_str);
    let hash = format!("{:016x}", f.signature_hash());
    let signature = f.signature();
    let value_type = f.ret.value_type();
    // What a call returns: one `ObjectRef`, or with `num_returns`, a tuple of them.
    let object_ref = match (parts, &f.stream) {
        (_, Some(item)) => quote!(::starling::ObjectRefGenerator<#item>),
        (None, None) => quote!(::starling::ObjectRef<#value_type>),
        (Some(parts), None) => quote!((#(::starling::ObjectRef<#parts>),*)),
    };
    let defaults = options.builder_calls();

    // The stubs' parameters: `a: impl IntoArg<i64>` in the user's names and spans.
    let params: Vec<TokenStream> = f
        .args
        .iter()
        .map(|arg| {
            let (arg_name, ty) = (&arg.name, &arg.ty);
            quote!(#arg_name: impl ::starling::IntoArg<#ty>)
        })
        .collect();
    let param_names: Vec<&Ident> = f.args.iter().map(|arg| &arg.name).collect();

    let args = Ident::new("args", Span::mixed_site());
    let count = f.args.len();
    let pushes = f.args.iter().map(|arg| {
        let (arg_name, ty) = (&arg.name, &arg.ty);
        quote!(#args.push::<#ty, _>(#arg_name);)
    });
    // Without arguments there is nothing to push, and `let mut` would warn.
    let builder_binding = if count == 0 {
        quote!(#args)
    } else {
        quote!(mut #args)
    };

    let checks = type_checks(f);
    let invoker = invoker(f, &args, &checks, parts);
    // An async function's tasks can run together on one worker (`max_concurrency`): it has an
    // entry point that returns its future instead of running it to the end.
    let concurrent = f.is_async && f.stream.is_none();
    let (concurrency_method, registration) = if concurrent {
        (
            quote! {
                /// Lets one worker run up to `n` tasks of this async function at once,
                /// interleaved at their `.await`s, each holding its own resources (default 1).
                pub fn max_concurrency(self, n: u32) -> Self {
                    Self(self.0.max_concurrency(n))
                }
            },
            quote! {
                ::starling::__private::Registration::with_async(
                    #name::NAME, #name::__invoke, #name::__invoke_async
                )
            },
        )
    } else {
        (
            TokenStream::new(),
            quote!(::starling::__private::Registration::new(#name::NAME, #name::__invoke)),
        )
    };
    let returns = Ident::new("returns", Span::mixed_site());
    let submit = match parts {
        None if f.stream.is_some() => {
            let item = f.stream.as_ref();
            quote!(::starling::__private::submit_stream::<#item>(#name::NAME, #args, self.0))
        }
        None => quote!(::starling::__private::submit::<#value_type>(#name::NAME, #args, self.0)),
        Some(parts) => {
            let n = parts.len() as u32;
            quote! {
                let mut #returns =
                    ::starling::__private::submit_returns(#name::NAME, #args, self.0, #n);
                (#(#returns.next::<#parts>()),*)
            }
        }
    };

    let struct_doc = format!(
        " Remote stub of the function `{name_str}`, generated by `#[starling::remote]`.\n\n \
         `{name_str}::remote(..)` submits a call as a task and returns an `ObjectRef`; each \
         argument may be a value, an `ObjectRef` or a `&ObjectRef`. `{name_str}::options()` \
         changes the task's options first. `{name_str}(..)` still calls the function directly.\n\n \
         Registered signature: `{signature}`."
    );
    let remote_doc = format!(
        " Submits `{name_str}(..)` as a task with the attribute's options and returns a reference \
         to its result."
    );
    let options_doc = format!(
        " The task options `{name_str}::remote` uses, to change before calling `.remote(..)`."
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
            /// The name this function is registered under: module path, name and a hash of the
            /// signature, so that a worker built from other code refuses the call.
            pub const NAME: &'static str =
                ::core::concat!(::core::module_path!(), "::", #name_str, "#", #hash);

            #[doc = #remote_doc]
            pub fn remote(#(#params),*) -> #object_ref {
                Self::options().remote(#(#param_names),*)
            }

            #[doc = #options_doc]
            pub fn options() -> #options_struct {
                #options_struct(::starling::TaskOptions::default() #defaults)
            }

            #invoker
        }

        #(#cfgs)*
        #[doc(hidden)]
        #[derive(Clone, Debug)]
        #[allow(non_camel_case_types, dead_code)]
        #[must_use = "task options do nothing until `.remote(..)` is called"]
        #vis struct #options_struct(::starling::TaskOptions);

        #(#cfgs)*
        #[allow(dead_code, clippy::too_many_arguments)]
        impl #options_struct {
            /// Sets the CPUs one run of the task holds.
            pub fn num_cpus(self, num_cpus: f64) -> Self {
                Self(self.0.num_cpus(num_cpus))
            }

            /// Sets the GPUs one run of the task holds.
            pub fn num_gpus(self, num_gpus: f64) -> Self {
                Self(self.0.num_gpus(num_gpus))
            }

            /// Sets the amount of a custom resource one run of the task holds.
            pub fn resources(self, name: &str, amount: f64) -> Self {
                Self(self.0.resources(name, amount))
            }

            /// Sets how many times a failed run is retried.
            pub fn max_retries(self, max_retries: u32) -> Self {
                Self(self.0.max_retries(max_retries))
            }

            /// Sets whether an application error (a panic or an `Err`) is retried too, not only
            /// a lost worker.
            pub fn retry_exceptions(self, retry_exceptions: bool) -> Self {
                Self(self.0.retry_exceptions(retry_exceptions))
            }

            /// Retries errors of type `E` (an `Err(E)` return); with this, only the types
            /// named this way (and panics, with `retry_on_panic`) are retried.
            pub fn retry_on<E: ?Sized + 'static>(self) -> Self {
                Self(self.0.retry_on::<E>())
            }

            /// Retries panics; with this, only panics (and the types given to `retry_on`) are
            /// retried.
            pub fn retry_on_panic(self) -> Self {
                Self(self.0.retry_on_panic())
            }

            /// For a function that returns an iterator: pauses the task while it is `n` items
            /// ahead of the caller (0: no limit).
            pub fn backpressure(self, n: u32) -> Self {
                Self(self.0.backpressure(n))
            }

            #concurrency_method

            /// Runs the task in a worker process with the environment variable `name` set to
            /// `value` (see [`TaskOptions::env_var`](::starling::TaskOptions::env_var)).
            pub fn env_var(
                self,
                name: impl ::core::convert::Into<::std::string::String>,
                value: impl ::core::convert::Into<::std::string::String>,
            ) -> Self {
                Self(self.0.env_var(name, value))
            }

            /// Sets several environment variables of the task's worker process (see
            /// [`TaskOptions::env_vars`](::starling::TaskOptions::env_vars)).
            pub fn env_vars<K, V>(self, vars: impl ::core::iter::IntoIterator<Item = (K, V)>) -> Self
            where
                K: ::core::convert::Into<::std::string::String>,
                V: ::core::convert::Into<::std::string::String>,
            {
                Self(self.0.env_vars(vars))
            }

            /// Sets where the task may run.
            pub fn scheduling_strategy(self, strategy: ::starling::SchedulingStrategy) -> Self {
                Self(self.0.scheduling_strategy(strategy))
            }

            /// Spreads tasks over all nodes that can take them.
            pub fn spread(self) -> Self {
                Self(self.0.spread())
            }

            /// Runs on `node`; if `soft`, on another node when it cannot.
            pub fn node_affinity(self, node: ::starling::NodeId, soft: bool) -> Self {
                Self(self.0.node_affinity(node, soft))
            }

            /// Submits the call as a task with these options.
            pub fn remote(self, #(#params),*) -> #object_ref {
                #checks
                let #builder_binding = ::starling::__private::ArgsBuilder::with_capacity(#count);
                #(#pushes)*
                #submit
            }
        }

        #(#cfgs)*
        const _: () = {
            #[::starling::__private::linkme::distributed_slice(
                ::starling::__private::REMOTE_FUNCTIONS
            )]
            #[linkme(crate = ::starling::__private::linkme)]
            static REGISTRATION: ::starling::__private::Registration = #registration;
        };

        #(#cfgs)*
        const _: fn() = || {
            #checks
        };
    }
}

/// The worker side: decode each argument, call the function, encode what it returned.
pub(crate) fn invoker(
    f: &RemoteFn,
    args: &Ident,
    checks: &TokenStream,
    parts: Option<&[syn::Type]>,
) -> TokenStream {
    let name = &f.name;
    invoker_calling(
        f,
        args,
        checks,
        parts,
        &format_ident!("__invoke"),
        &|locals: &[Ident]| quote!(#name(#(#locals),*)),
    )
}

/// [`invoker`] with the entry point named `entry` (its async twin `{entry}_async`) and the call
/// written by `make_call` from the decoded arguments (an actor's method call, for instance).
pub(crate) fn invoker_calling(
    f: &RemoteFn,
    args: &Ident,
    checks: &TokenStream,
    parts: Option<&[syn::Type]>,
    entry: &Ident,
    make_call: &dyn Fn(&[Ident]) -> TokenStream,
) -> TokenStream {
    let entry_async = format_ident!("{}_async", entry);
    let (locals, decodes) = decode_args(f, args);
    let count = f.args.len();
    let direct = make_call(&locals);
    let call = if f.is_async {
        quote!(::starling::__private::block_on(#direct))
    } else {
        direct.clone()
    };
    let future = Ident::new("future", Span::mixed_site());
    let value = Ident::new("value", Span::mixed_site());
    // Encodes `value` (of type `ty`): whole, or each element of the tuple as its own object, or
    // for a streaming function, each item as it comes.
    let encode = |ty: &syn::Type| match parts {
        None if f.stream.is_some() => {
            let item = f.stream.as_ref();
            quote!(::starling::__private::stream_items::<#item>(#value))
        }
        None => quote!(::starling::__private::encode_return::<#ty>(&#value)),
        Some(parts) => {
            let index = (0..parts.len()).map(syn::Index::from);
            quote! {
                ::starling::__private::encode_returns(::std::vec![
                    #(::starling::__private::encode_part::<#parts>(&#value.#index)?),*
                ])
            }
        }
    };
    let body_of = |call: TokenStream| match &f.ret {
        Return::Unit => quote! {
            #call;
            ::starling::__private::encode_return::<()>(&())
        },
        Return::Value(ty) => {
            let encode = encode(ty);
            // An `impl Iterator` cannot be named in a `let`.
            let binding = match f.stream {
                Some(_) => quote!(#value),
                None => quote!(#value: #ty),
            };
            quote! {
                let #binding = #call;
                #encode
            }
        }
        Return::Result(ok) => {
            let error = Ident::new("error", Span::mixed_site());
            // Spanned at the return type, so an error type without `Display` is reported there.
            let span = f
                .output
                .as_ref()
                .map_or_else(Span::call_site, Spanned::span);
            let app_error = quote_spanned!(span=> ::starling::__private::app_error);
            let encode = encode(ok);
            quote! {
                match #call {
                    ::core::result::Result::Ok(#value) => {
                        #encode
                    }
                    ::core::result::Result::Err(#error) => {
                        ::core::result::Result::Err(#app_error(#error))
                    }
                }
            }
        }
    };
    let body = body_of(call);
    // For an async function, also the entry point that runs it as one of several tasks on a
    // worker: the arguments are decoded now, the value encoded when the future ends.
    let async_entry = if f.is_async && f.stream.is_none() {
        let body = body_of(quote!(#future.await));
        quote! {
            #[doc(hidden)]
            pub fn #entry_async(
                #args: &[&[u8]],
            ) -> ::core::result::Result<
                ::starling::__private::TaskFuture,
                ::starling::__private::InvokeError,
            > {
                #checks
                ::starling::__private::check_arity(#args, #count)?;
                #(#decodes)*
                let #future = #direct;
                ::core::result::Result::Ok(::starling::__private::task_future(async move {
                    #body
                }))
            }
        }
    } else {
        TokenStream::new()
    };
    quote! {
        #[doc(hidden)]
        pub fn #entry(
            #args: &[&[u8]],
        ) -> ::core::result::Result<::std::vec::Vec<u8>, ::starling::__private::InvokeError> {
            #checks
            ::starling::__private::check_arity(#args, #count)?;
            #(#decodes)*
            #body
        }

        #async_entry
    }
}

/// The locals `arg0, arg1, ..` (hygienic) and the statements that decode each argument of `f`
/// from `args` into them.
pub(crate) fn decode_args(f: &RemoteFn, args: &Ident) -> (Vec<Ident>, Vec<TokenStream>) {
    f.args
        .iter()
        .enumerate()
        .map(|(index, arg)| {
            let local = Ident::new(&format!("arg{index}"), Span::mixed_site());
            let ty = &arg.ty;
            let decode =
                quote!(let #local = ::starling::__private::decode_arg::<#ty>(#args, #index)?;);
            (local, decode)
        })
        .unzip()
}

/// Registers `entry` (a path to an invoker) under the name `name` (an expression) in the
/// function registry.
pub(crate) fn registration(name: &TokenStream, entry: &TokenStream) -> TokenStream {
    registering(&quote!(::starling::__private::Registration::new(#name, #entry)))
}

/// [`registration`] of an async function's two entry points: the one that runs it to the end,
/// and the one that returns its future (to run beside others).
pub(crate) fn registration_async(
    name: &TokenStream,
    entry: &TokenStream,
    entry_async: &TokenStream,
) -> TokenStream {
    registering(&quote!(::starling::__private::Registration::with_async(
        #name, #entry, #entry_async
    )))
}

/// Adds the registration `made` (a `Registration` expression) to the registry's linker section.
fn registering(made: &TokenStream) -> TokenStream {
    quote! {
        const _: () = {
            #[::starling::__private::linkme::distributed_slice(
                ::starling::__private::REMOTE_FUNCTIONS
            )]
            #[linkme(crate = ::starling::__private::linkme)]
            static REGISTRATION: ::starling::__private::Registration = #made;
        };
    }
}

/// `assert_remote_value::<T>()` for every argument type and the value type, each spanned at the
/// type so that the `RemoteValue` error ("`T` cannot be an argument or return value ..") points at
/// the offending type rather than at the attribute.
///
/// The checks stand alone in a `const _` and also open every generated body that names the types.
/// rustc reports an unmet bound once per body and span, and drops a diagnostic identical to one it
/// already printed, so a non-serializable type gives one error from `assert_remote_value` instead
/// of one per `decode_arg`, `push`, `submit` and `encode_return` that also require it.
pub(crate) fn type_checks(f: &RemoteFn) -> TokenStream {
    f.args
        .iter()
        .map(|arg| &arg.ty)
        .chain(f.stream.as_ref().or(f.ret.checked_type()))
        .map(|ty| {
            quote_spanned! {ty.span()=>
                ::starling::__private::assert_remote_value::<#ty>();
            }
        })
        .collect()
}
