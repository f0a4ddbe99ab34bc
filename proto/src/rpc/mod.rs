//! The gRPC services in domain types: the protobuf edge.
//!
//! The service stubs ([`head_server`], [`head_client`], [`object_service_server`],
//! [`object_service_client`]) are generated from the schema's `service` blocks by
//! `tonic-build`'s manual generator (see `tests/generated.rs`), with the domain types of this
//! crate as their messages and [`WireCodec`] as their codec. The codec converts each message to
//! its private protobuf form as it is encoded and from it as it is decoded, so no crate but this
//! one ever holds a generated message; a message that decodes but does not convert (a task
//! without a function, an op without a kind) is refused as `INVALID_ARGUMENT`, like bytes that
//! do not decode at all.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

use crate::wire::DecodeError;

mod jobs;
mod node;
mod session;
mod state;
mod transfer;

#[cfg(test)]
mod fuzz_tests;

#[allow(clippy::all, missing_docs, rust_2018_idioms, unreachable_pub)]
mod head {
    include!("../generated/starling.v1.Head.rs");
}
#[allow(clippy::all, missing_docs, rust_2018_idioms, unreachable_pub)]
mod object_service {
    include!("../generated/starling.v1.ObjectService.rs");
}

pub use head::{head_client, head_server};
pub use object_service::{object_service_client, object_service_server};

/// Converts every decoded item, or says why one does not convert.
pub(crate) fn try_all<P, T: TryFrom<P, Error = DecodeError>>(
    items: Vec<P>,
) -> Result<Vec<T>, DecodeError> {
    items.into_iter().map(T::try_from).collect()
}

/// Messages this process refused as malformed (they did not decode, or did not convert).
static MALFORMED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Calls this process refused since it started: for a missing or wrong cluster token, and for
/// a malformed message (the figures of a head's `starling_rpc_errors`).
pub fn refused_calls() -> (u64, u64) {
    (
        crate::security::unauthenticated_calls(),
        MALFORMED.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// Counts a malformed message refused outside gRPC (on the session link).
pub fn note_malformed() {
    MALFORMED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The message of a request or reply that carries nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Empty;

mod sealed {
    pub trait Sealed {}
}

/// A domain type with a protobuf form: what travels in a gRPC message, or on disk.
pub trait Wire: Sized + Send + 'static + sealed::Sealed {
    /// The generated message (private to this crate).
    #[doc(hidden)]
    type Pb: Message + Default + Send + 'static;

    /// Its protobuf form.
    #[doc(hidden)]
    fn into_pb(self) -> Self::Pb;

    /// The domain value of a decoded message, or why it is malformed.
    #[doc(hidden)]
    fn from_pb(pb: Self::Pb) -> Result<Self, DecodeError>;

    /// Its protobuf encoding.
    fn to_bytes(self) -> Vec<u8> {
        self.into_pb().encode_to_vec()
    }

    /// Decodes protobuf bytes: malformed bytes or a message that does not convert is an error.
    fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        Self::from_pb(Self::Pb::decode(bytes)?)
    }
}

/// Implements [`Wire`] for domain types whose conversions are `From<T> for pb` and either
/// `TryFrom<pb> for T` with [`DecodeError`] (`try`) or `From<pb> for T`.
macro_rules! wire {
    (@one $t:ty, $pb:ty, $p:ident => $from:expr) => {
        impl crate::rpc::sealed::Sealed for $t {}
        impl crate::rpc::Wire for $t {
            type Pb = $pb;
            fn into_pb(self) -> $pb {
                self.into()
            }
            fn from_pb($p: $pb) -> Result<Self, crate::wire::DecodeError> {
                $from
            }
        }
    };
    (try $($t:ty => $pb:ty),* $(,)?) => {$(
        wire!(@one $t, $pb, p => p.try_into());
    )*};
    ($($t:ty => $pb:ty),* $(,)?) => {$(
        wire!(@one $t, $pb, p => Ok(p.into()));
    )*};
}
pub(crate) use wire;

/// The codec of every Starling RPC: protobuf on the wire, domain types on either side.
#[derive(Debug)]
pub struct WireCodec<E, D>(PhantomData<fn(E, D)>);

impl<E, D> Default for WireCodec<E, D> {
    fn default() -> Self {
        WireCodec(PhantomData)
    }
}

impl<E: Wire, D: Wire> Codec for WireCodec<E, D> {
    type Encode = E;
    type Decode = D;
    type Encoder = WireEncoder<E>;
    type Decoder = WireDecoder<D>;

    fn encoder(&mut self) -> WireEncoder<E> {
        WireEncoder(PhantomData)
    }

    fn decoder(&mut self) -> WireDecoder<D> {
        WireDecoder(PhantomData)
    }
}

/// Encodes a domain value as its protobuf form.
#[derive(Debug)]
pub struct WireEncoder<E>(PhantomData<fn(E)>);

impl<E: Wire> Encoder for WireEncoder<E> {
    type Item = E;
    type Error = Status;

    fn encode(&mut self, item: E, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.into_pb()
            .encode(buf)
            .map_err(|e| Status::internal(format!("encoding a message: {e}")))
    }
}

/// Decodes a protobuf message into its domain value.
#[derive(Debug)]
pub struct WireDecoder<D>(PhantomData<fn() -> D>);

impl<D: Wire> Decoder for WireDecoder<D> {
    type Item = D;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<D>, Status> {
        let malformed = |e: String| {
            MALFORMED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Status::invalid_argument(e)
        };
        let pb = D::Pb::decode(buf).map_err(|e| malformed(e.to_string()))?;
        D::from_pb(pb)
            .map(Some)
            .map_err(|e| malformed(e.to_string()))
    }
}
