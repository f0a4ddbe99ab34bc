//! The streamed transfers' protobuf forms.

use super::wire;
use crate::chunks::{BinaryRef, Chunk, FetchRequest};
use crate::{pb, ObjectId};

wire!(Chunk => pb::Chunk, FetchRequest => pb::FetchRequest, BinaryRef => pb::BinaryRef);

impl From<Chunk> for pb::Chunk {
    fn from(c: Chunk) -> Self {
        pb::Chunk {
            data: c.data,
            total: c.total,
            build: c.build,
        }
    }
}

impl From<pb::Chunk> for Chunk {
    fn from(c: pb::Chunk) -> Self {
        Chunk {
            data: c.data,
            total: c.total,
            build: c.build,
        }
    }
}

impl From<FetchRequest> for pb::FetchRequest {
    fn from(r: FetchRequest) -> Self {
        pb::FetchRequest {
            object: r.object.0,
            epoch: r.epoch,
        }
    }
}

impl From<pb::FetchRequest> for FetchRequest {
    fn from(r: pb::FetchRequest) -> Self {
        FetchRequest {
            object: ObjectId(r.object),
            epoch: r.epoch,
        }
    }
}

impl From<BinaryRef> for pb::BinaryRef {
    fn from(b: BinaryRef) -> Self {
        pb::BinaryRef { build: b.build }
    }
}

impl From<pb::BinaryRef> for BinaryRef {
    fn from(b: pb::BinaryRef) -> Self {
        BinaryRef { build: b.build }
    }
}
