//! The value codec: serde + bincode 2 (standard configuration), in one place.
//!
//! Every argument, return value and `put` value goes through here, so the wire format of user
//! values can change in one module.

use serde::de::DeserializeOwned;
use serde::Serialize;

use starling_worker::store::Blob;

use crate::error::Error;

const CONFIG: bincode::config::Configuration = bincode::config::standard();

/// Encodes `value` into a buffer of exactly the encoded size: a sizing pass first, so a large
/// value is written once instead of being copied on every growth of the buffer.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    let err = |e: bincode::error::EncodeError| Error::Codec {
        op: "encode",
        type_name: std::any::type_name::<T>(),
        message: e.to_string(),
    };
    let mut sizer = bincode::enc::write::SizeWriter::default();
    bincode::serde::encode_into_writer(value, &mut sizer, CONFIG).map_err(err)?;
    let mut out = Vec::with_capacity(sizer.bytes_written);
    bincode::serde::encode_into_std_write(value, &mut out, CONFIG).map_err(err)?;
    Ok(out)
}

/// Decodes a `T` from a stored object's bytes; `Bytes` inside it share the object's buffer
/// instead of copying it.
pub fn decode_shared<T: DeserializeOwned>(blob: &Blob) -> Result<T, Error> {
    crate::bytes::with_sources(std::slice::from_ref(blob), || decode(blob))
}

/// Decodes a `T` from all of `bytes`. Byte strings are handed to the decoder borrowed, so
/// `Bytes` can share a registered source buffer (see [`decode_shared`]).
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let err = |message: String| Error::Codec {
        op: "decode",
        type_name: std::any::type_name::<T>(),
        message,
    };
    let (v, used) = bincode::serde::borrow_decode_from_slice::<T, _>(bytes, CONFIG)
        .map_err(|e| err(e.to_string()))?;
    if used != bytes.len() {
        return Err(err(format!("{} trailing bytes", bytes.len() - used)));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_typed_errors() {
        let v = (1u64, "two".to_string(), vec![3.0f64]);
        let b = encode(&v).unwrap();
        assert_eq!(decode::<(u64, String, Vec<f64>)>(&b).unwrap(), v);
        let e = decode::<String>(&[0xff, 0xff]).unwrap_err();
        assert!(matches!(
            e,
            Error::Codec {
                op: "decode",
                type_name: "alloc::string::String",
                ..
            }
        ));
        assert!(
            decode::<u8>(&[1, 2]).is_err(),
            "trailing bytes are an error"
        );
    }
}
