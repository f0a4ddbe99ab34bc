//! `#[starling::actor]`: an `impl` block whose type becomes an actor.
//!
//! For `impl Counter { fn new(start: u64) -> Self; fn incr(&mut self, by: u64) -> u64 }` it
//! keeps the block as written and emits beside it:
//!
//! ```text
//! impl Counter {
//!     fn remote(start: impl IntoArg<u64>) -> CounterHandle;   // creates an actor
//!     fn options() -> CounterOptions;                          // ActorOptions, then .remote(..)
//!     fn __starling_new(&[&[u8]]) -> ..;    // worker side: run `new`, keep the state
//!     fn __starling_incr(&[&[u8]]) -> ..;   // worker side: run `incr` on the kept state
//! }
//! struct CounterHandle(ActorHandle);        // Clone, Serialize; incr(by) -> ObjectRef<u64>
//! impl starling::Actor for Counter { type Handle = CounterHandle; const CLASS: &str; }
//! // one registration per constructor and method, named "<module>::Counter::incr#<hash>"
//! ```
//!
//! Constructor and method signatures follow `#[remote]`'s rules (owned serde arguments and
//! values, `Result` for errors), checked by the same code; the state itself never leaves its
//! process, so the type need not be serializable (it must be `Send`: calls may run on any of
//! its worker's threads).
//!
//! An actor with an `async` method is an async actor (Ray's): up to its `max_concurrency`
//! calls (default 1,000) are in flight at once, interleaved at their `.await`s on its worker's
//! thread, so every method takes `&self` and the state is kept as an `Arc` (the type must be
//! `Send + Sync`; mutable state goes in a `Mutex` or atomics). Its sync methods run on the same
//! thread, one at a time between the awaits.
//!
//! `#[starling::actor(max_concurrency = N)]` on a sync actor makes a threaded actor (Ray's
//! threaded actors): up to N calls run at once, each on a thread of its own, so again every
//! method takes `&self` and the state is an `Arc` of a `Send + Sync` type. On an async actor
//! it sets the default in place of 1,000.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{
    Expr, FnArg, Ident, ImplItem, ImplItemFn, ItemFn, ItemImpl, MetaNameValue, ReturnType, Type,
};

use crate::expand::{
    decode_args, invoker_calling, registration, registration_async, type_checks, with_item,
};
use crate::signature::{self, RemoteFn};

/// Entry point: parses, validates and expands, turning any problem into `compile_error!`.
pub(crate) fn actor(attr: TokenStream, item: TokenStream) -> TokenStream {
    let concurrency = match parse_attr(attr) {
        Ok(c) => c,
        Err(e) => return with_item(e, item),
    };
    let block: ItemImpl = match syn::parse2(item.clone()) {
        Ok(block) => block,
        Err(_) => {
            let error = syn::Error::new(
                Span::call_site(),
                "#[starling::actor] goes on an inherent `impl` block: `impl MyType { fn new(..) \
                 -> Self { .. } fn method(&mut self, ..) -> T { .. } }`",
            );
            return with_item(error, item);
        }
    };
    match analyze(&block, concurrency) {
        Ok(actor) => expand(&block, &actor),
        Err(e) => with_item(e, item),
    }
}

/// The attribute's one option, `max_concurrency = N`: the actor's default for how many calls
/// it runs at once.
fn parse_attr(attr: TokenStream) -> syn::Result<Option<Expr>> {
    if attr.is_empty() {
        return Ok(None);
    }
    let wrong = |span: &dyn quote::ToTokens| {
        syn::Error::new_spanned(
            span,
            "#[starling::actor] takes one option, `max_concurrency = N` (calls run at once); \
             set the others per actor with `Type::options().num_cpus(..).name(..).remote(..)`",
        )
    };
    let parsed = syn::parse::Parser::parse2(
        syn::punctuated::Punctuated::<MetaNameValue, syn::Token![,]>::parse_terminated,
        attr.clone(),
    )
    .map_err(|_| wrong(&attr))?;
    let mut found = None;
    for option in parsed {
        if !option.path.is_ident("max_concurrency") || found.is_some() {
            return Err(wrong(&option));
        }
        found = Some(option.value);
    }
    Ok(found)
}

struct ActorImpl {
    /// The type's name.
    ty: Ident,
    ctor: RemoteFn,
    /// Whether the constructor returns a `Result`.
    ctor_fallible: bool,
    methods: Vec<RemoteFn>,
    /// Whether a method is `async` (then every method takes `&self`).
    is_async: bool,
    /// `#[starling::actor(max_concurrency = N)]`: the default of how many calls run at once.
    /// On a sync actor it makes a threaded actor (every method takes `&self`).
    concurrency: Option<Expr>,
}

impl ActorImpl {
    /// Whether its calls may run at once (async or threaded): its state is an `Arc` shared by
    /// them, and every method takes `&self`.
    fn shares_state(&self) -> bool {
        self.is_async || self.concurrency.is_some()
    }
}

fn analyze(block: &ItemImpl, concurrency: Option<Expr>) -> syn::Result<ActorImpl> {
    if let Some((_, path, _)) = &block.trait_ {
        return Err(syn::Error::new_spanned(
            path,
            "#[starling::actor] goes on an inherent `impl` block, not a trait impl",
        ));
    }
    if !block.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &block.generics,
            "an actor type cannot be generic: make a non-generic type (or a wrapper) the actor",
        ));
    }
    let ty = match &*block.self_ty {
        Type::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
            let seg = &p.path.segments[0];
            if !seg.arguments.is_empty() {
                return Err(syn::Error::new_spanned(
                    &block.self_ty,
                    "an actor type cannot be generic",
                ));
            }
            seg.ident.clone()
        }
        other => {
            return Err(syn::Error::new_spanned(
                other,
                "#[starling::actor] needs the type by its plain name: `impl MyType { .. }`",
            ))
        }
    };
    let mut errors: Option<syn::Error> = None;
    let mut push = |e: syn::Error| match &mut errors {
        Some(all) => all.combine(e),
        None => errors = Some(e),
    };
    let mut ctor = None;
    let mut methods = Vec::new();
    let is_async = block.items.iter().any(|item| {
        matches!(item, ImplItem::Fn(f) if f.sig.asyncness.is_some()
            && matches!(f.sig.inputs.first(), Some(FnArg::Receiver(_))))
    });
    for item in &block.items {
        let ImplItem::Fn(f) = item else { continue };
        match f.sig.inputs.first() {
            Some(FnArg::Receiver(r)) => {
                if r.reference.is_none() || r.colon_token.is_some() {
                    push(syn::Error::new_spanned(
                        r,
                        "an actor's methods take `&self` or `&mut self` (its state stays in its \
                         process; a method cannot consume it)",
                    ));
                    continue;
                }
                if is_async && r.mutability.is_some() {
                    push(syn::Error::new_spanned(
                        r,
                        "an actor with async methods runs its calls concurrently, so every \
                         method takes `&self`: keep mutable state in a `Mutex` or atomics",
                    ));
                    continue;
                }
                if concurrency.is_some() && r.mutability.is_some() {
                    push(syn::Error::new_spanned(
                        r,
                        "a threaded actor (`max_concurrency`) runs its calls at once on several \
                         threads, so every method takes `&self`: keep mutable state in a \
                         `Mutex` or atomics",
                    ));
                    continue;
                }
                match signature::analyze(&without_receiver(f)) {
                    Ok(m) if m.stream.is_some() => push(syn::Error::new_spanned(
                        &f.sig.output,
                        "an actor method cannot stream its returns yet: return a `Vec`",
                    )),
                    Ok(m) => methods.push(m),
                    Err(e) => push(e),
                }
            }
            _ if f.sig.ident == "new" => match constructor(f, &ty) {
                Ok(c) => ctor = Some(c),
                Err(e) => push(e),
            },
            _ => {}
        }
    }
    if let Some(e) = errors {
        return Err(e);
    }
    let Some((ctor, ctor_fallible)) = ctor else {
        return Err(syn::Error::new_spanned(
            &block.self_ty,
            "an actor needs a constructor in this block: `fn new(..) -> Self` (or `-> \
             Result<Self, E>`)",
        ));
    };
    Ok(ActorImpl {
        ty,
        ctor,
        ctor_fallible,
        methods,
        is_async,
        concurrency,
    })
}

/// The method as a free function without its receiver, for `#[remote]`'s checks.
fn without_receiver(f: &ImplItemFn) -> ItemFn {
    let mut sig = f.sig.clone();
    sig.inputs = sig
        .inputs
        .into_iter()
        .filter(|a| !matches!(a, FnArg::Receiver(_)))
        .collect();
    ItemFn {
        attrs: f.attrs.clone(),
        vis: f.vis.clone(),
        sig,
        block: Box::new(f.block.clone()),
    }
}

/// Checks `new`: `-> Self` (or the type's name), or `-> Result<Self, E>`; arguments as for
/// `#[remote]`. Returns its shape and whether it is fallible.
fn constructor(f: &ImplItemFn, ty: &Ident) -> syn::Result<(RemoteFn, bool)> {
    if f.sig.asyncness.is_some() {
        return Err(syn::Error::new_spanned(
            f.sig.asyncness,
            "an actor's constructor cannot be async",
        ));
    }
    let is_self = |t: &Type| matches!(t, Type::Path(p) if p.qself.is_none() && (p.path.is_ident("Self") || p.path.is_ident(ty)));
    let fallible = match &f.sig.output {
        ReturnType::Type(_, t) if is_self(t) => false,
        ReturnType::Type(_, t) => match result_ok(t) {
            Some(ok) if is_self(ok) => true,
            _ => {
                return Err(syn::Error::new_spanned(
                    t,
                    "an actor's constructor returns `Self` or `Result<Self, E>`",
                ))
            }
        },
        ReturnType::Default => {
            return Err(syn::Error::new_spanned(
                &f.sig,
                "an actor's constructor returns `Self` or `Result<Self, E>`",
            ))
        }
    };
    let mut free = without_receiver(f);
    free.sig.output = ReturnType::Default;
    Ok((signature::analyze(&free)?, fallible))
}

/// The `T` of `Result<T, E>` (any path ending in `Result` with type arguments).
fn result_ok(t: &Type) -> Option<&Type> {
    let Type::Path(p) = t else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(a) = &last.arguments else {
        return None;
    };
    match a.args.first()? {
        syn::GenericArgument::Type(t) => Some(t),
        _ => None,
    }
}

fn expand(block: &ItemImpl, a: &ActorImpl) -> TokenStream {
    let ty = &a.ty;
    let ty_str = syn::ext::IdentExt::unraw(ty).to_string();
    let handle = format_ident!("{}Handle", ty_str);
    let options = format_ident!("{}Options", ty_str);
    let args = Ident::new("args", Span::mixed_site());
    let this = Ident::new("this", Span::mixed_site());
    let value = Ident::new("value", Span::mixed_site());

    // The constructor: decode, build, keep the state.
    let ctor = &a.ctor;
    let ctor_name = format!("::new#{:016x}", ctor.signature_hash());
    let ctor_checks = type_checks(ctor);
    let ctor_count = ctor.args.len();
    let (ctor_locals, ctor_decodes) = decode_args(ctor, &args);
    let ctor_registration = registration(
        &quote!(::core::concat!(::core::module_path!(), "::", #ty_str, #ctor_name)),
        &quote!(#ty::__starling_new),
    );
    let build = if a.ctor_fallible {
        quote! {
            let #value = #ty::new(#(#ctor_locals),*)
                .map_err(::starling::__private::app_error)?;
        }
    } else {
        quote!(let #value = #ty::new(#(#ctor_locals),*);)
    };
    let (params, pushes) = stub_parts(ctor, &args);
    let param_names: Vec<&Ident> = ctor.args.iter().map(|x| &x.name).collect();
    let builder = builder_binding(ctor, &args);

    // The methods: worker-side entry points, handle-side stubs, registrations.
    let mut entries = Vec::new();
    let mut stubs = Vec::new();
    let mut registrations = Vec::new();
    for m in &a.methods {
        let name = &m.name;
        let entry = format_ident!("__starling_{}", name);
        let registered = format!(
            "::{}#{:016x}",
            syn::ext::IdentExt::unraw(name),
            m.signature_hash()
        );
        let full_name = quote!(::core::concat!(::core::module_path!(), "::", #ty_str, #registered));
        let checks = type_checks(m);
        let make = |locals: &[Ident]| match (a.shares_state(), m.is_async) {
            // The call's future owns its share of the state.
            (_, true) => quote! {{
                let #this = ::starling::__private::shared_actor_state::<#ty>()?;
                async move { #this.#name(#(#locals),*).await }
            }},
            (true, false) => quote! {
                ::starling::__private::shared_actor_state::<#ty>()?.#name(#(#locals),*)
            },
            (false, false) => quote! {
                ::starling::__private::with_actor_state::<#ty, _>(
                    move |#this: &mut #ty| #this.#name(#(#locals),*)
                )?
            },
        };
        entries.push(invoker_calling(m, &args, &checks, None, &entry, &make));
        // An async method's calls, and a threaded actor's, may run beside others in flight.
        let concurrent = m.is_async || (!a.is_async && a.concurrency.is_some());
        let call = if concurrent {
            quote!(call_actor_concurrent)
        } else {
            quote!(call_actor)
        };
        let value_type = m.ret.value_type();
        let (params, pushes) = stub_parts(m, &args);
        let builder = builder_binding(m, &args);
        let count = m.args.len();
        let doc = format!(" Calls `{ty_str}::{name}` on the actor: a task on its worker, run after the calls submitted before it.");
        stubs.push(quote! {
            #[doc = #doc]
            pub fn #name(&self, #(#params),*) -> ::starling::ObjectRef<#value_type> {
                #checks
                let #builder = ::starling::__private::ArgsBuilder::with_capacity(#count);
                #(#pushes)*
                ::starling::__private::#call::<#value_type>(&self.0, #full_name, #args)
            }
        });
        let register = if m.is_async {
            let entry_async = format_ident!("{}_async", entry);
            registration_async(&full_name, &quote!(#ty::#entry), &quote!(#ty::#entry_async))
        } else {
            registration(&full_name, &quote!(#ty::#entry))
        };
        registrations.push(quote! {
            #register
            const _: fn() = || {
                #checks
            };
        });
    }
    // An async or threaded actor keeps its state as an `Arc` (its calls in flight share it),
    // and lets up to `max_concurrency` calls in at once.
    let (stored, store_value, new_options, concurrency_method) = if a.shares_state() {
        let (default, doc) = match (&a.concurrency, a.is_async) {
            (Some(n), true) => (
                quote!(#n),
                " How many of its calls may be in flight at once, interleaved at their \
                 `.await`s (1: one at a time).",
            ),
            (None, _) => (
                quote!(1000),
                " How many of its calls may be in flight at once, interleaved at their \
                 `.await`s (default 1,000, as Ray's async actors; 1: one at a time).",
            ),
            (Some(n), false) => (
                quote!(#n),
                " How many of its calls may run at once, each on a thread of its own (1: one \
                 at a time, in the order submitted).",
            ),
        };
        (
            quote!(::std::sync::Arc<#ty>),
            quote!(::std::sync::Arc::new(#value)),
            quote!(::starling::ActorOptions::new(<#ty as ::starling::Actor>::CLASS).max_concurrency(#default)),
            quote! {
                #[doc = #doc]
                pub fn max_concurrency(self, n: u32) -> Self { Self(self.0.max_concurrency(n)) }
            },
        )
    } else {
        (
            quote!(#ty),
            quote!(#value),
            quote!(::starling::ActorOptions::new(<#ty as ::starling::Actor>::CLASS)),
            TokenStream::new(),
        )
    };
    let handle_doc = format!(
        " A handle to a `{ty_str}` actor, made by `#[starling::actor]`: each method submits a \
         call to the actor and returns an `ObjectRef` of its value. Clone it and pass it to \
         tasks and other actors: the actor lives while a handle does."
    );
    let options_doc = format!(
        " How a `{ty_str}` actor is made (`{ty_str}::options()`), then `.remote(..)` creates it."
    );

    quote! {
        #block

        #[doc = #handle_doc]
        #[derive(Clone, Debug)]
        pub struct #handle(::starling::ActorHandle);

        impl ::core::convert::From<::starling::ActorHandle> for #handle {
            fn from(h: ::starling::ActorHandle) -> Self {
                #handle(h)
            }
        }

        impl ::core::convert::AsRef<::starling::ActorHandle> for #handle {
            fn as_ref(&self) -> &::starling::ActorHandle {
                &self.0
            }
        }

        impl ::starling::__private::serde::Serialize for #handle {
            fn serialize<S: ::starling::__private::serde::Serializer>(
                &self,
                s: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                ::starling::__private::serde::Serialize::serialize(&self.0, s)
            }
        }

        impl<'de> ::starling::__private::serde::Deserialize<'de> for #handle {
            fn deserialize<D: ::starling::__private::serde::Deserializer<'de>>(
                d: D,
            ) -> ::core::result::Result<Self, D::Error> {
                ::core::result::Result::Ok(#handle(
                    <::starling::ActorHandle as ::starling::__private::serde::Deserialize>::deserialize(d)?,
                ))
            }
        }

        #[allow(dead_code, clippy::too_many_arguments)]
        impl #handle {
            /// The untyped handle (the actor's id, `ready`, `kill`).
            pub fn actor(&self) -> &::starling::ActorHandle {
                &self.0
            }

            /// Kills the actor (see `starling::ActorHandle::kill`).
            pub fn kill(&self, no_restart: bool) -> ::starling::Result<()> {
                self.0.kill(no_restart)
            }

            #(#stubs)*
        }

        #[doc = #options_doc]
        #[derive(Clone, Debug)]
        #[must_use = "actor options do nothing until `.remote(..)` is called"]
        pub struct #options(::starling::ActorOptions);

        #[allow(dead_code, clippy::too_many_arguments)]
        impl #options {
            /// CPUs the actor holds for its whole life.
            pub fn num_cpus(self, n: f64) -> Self { Self(self.0.num_cpus(n)) }
            /// GPUs the actor holds for its whole life.
            pub fn num_gpus(self, n: f64) -> Self { Self(self.0.num_gpus(n)) }
            /// An amount of a custom resource the actor holds for its whole life.
            pub fn resources(self, name: &str, amount: f64) -> Self { Self(self.0.resources(name, amount)) }
            /// Its name, by which `starling::get_actor` finds it.
            pub fn name(self, name: impl ::core::convert::Into<::std::string::String>) -> Self { Self(self.0.name(name)) }
            /// With a name: return the live actor of that name if there is one.
            pub fn get_if_exists(self, yes: bool) -> Self { Self(self.0.get_if_exists(yes)) }
            /// The actor lives until killed, not only while a handle does.
            pub fn lifetime_detached(self) -> Self { Self(self.0.lifetime_detached()) }
            /// Restarts after its process dies (`u32::MAX`: always).
            pub fn max_restarts(self, n: u32) -> Self { Self(self.0.max_restarts(n)) }
            /// Retries of a call lost with the actor's process.
            pub fn max_task_retries(self, n: u32) -> Self { Self(self.0.max_task_retries(n)) }
            /// Where the actor may run.
            pub fn scheduling_strategy(self, s: ::starling::SchedulingStrategy) -> Self { Self(self.0.scheduling_strategy(s)) }
            #concurrency_method
            /// An environment variable of the actor's worker process.
            pub fn env_var(
                self,
                name: impl ::core::convert::Into<::std::string::String>,
                value: impl ::core::convert::Into<::std::string::String>,
            ) -> Self {
                Self(self.0.env_var(name, value))
            }

            /// Creates the actor with these options.
            pub fn remote(self, #(#params),*) -> #handle {
                #ctor_checks
                let #builder = ::starling::__private::ArgsBuilder::with_capacity(#ctor_count);
                #(#pushes)*
                #handle(::starling::__private::create_actor(
                    ::core::concat!(::core::module_path!(), "::", #ty_str, #ctor_name),
                    #args,
                    self.0,
                ))
            }
        }

        #[allow(dead_code, clippy::too_many_arguments)]
        impl #ty {
            /// Creates an actor of this type (its constructor runs on a worker of its own) and
            /// returns a handle to it.
            pub fn remote(#(#params),*) -> #handle {
                Self::options().remote(#(#param_names),*)
            }

            /// The options `remote` uses, to change before calling `.remote(..)`.
            pub fn options() -> #options {
                #options(#new_options)
            }

            #[doc(hidden)]
            pub fn __starling_new(
                #args: &[&[u8]],
            ) -> ::core::result::Result<::std::vec::Vec<u8>, ::starling::__private::InvokeError> {
                #ctor_checks
                ::starling::__private::check_arity(#args, #ctor_count)?;
                #(#ctor_decodes)*
                #build
                ::starling::__private::store_actor_state::<#stored>(#store_value)?;
                ::starling::__private::encode_return::<()>(&())
            }

            #(#entries)*
        }

        impl ::starling::Actor for #ty {
            type Handle = #handle;
            const CLASS: &'static str = ::core::concat!(::core::module_path!(), "::", #ty_str);
        }

        #ctor_registration

        #(#registrations)*
    }
}

/// The stub's parameters (`a: impl IntoArg<T>`) and the pushes of each onto the builder.
fn stub_parts(f: &RemoteFn, args: &Ident) -> (Vec<TokenStream>, Vec<TokenStream>) {
    f.args
        .iter()
        .map(|arg| {
            let (name, ty) = (&arg.name, &arg.ty);
            (
                quote!(#name: impl ::starling::IntoArg<#ty>),
                quote!(#args.push::<#ty, _>(#name);),
            )
        })
        .unzip()
}

/// `args` or `mut args`: without arguments there is nothing to push, and `mut` would warn.
fn builder_binding(f: &RemoteFn, args: &Ident) -> TokenStream {
    if f.args.is_empty() {
        quote!(#args)
    } else {
        quote!(mut #args)
    }
}
