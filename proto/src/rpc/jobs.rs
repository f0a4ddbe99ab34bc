//! The job and pool RPCs' messages (the job table's own conversions are in [`crate::jobs`]).

use super::{wire, Empty};
use crate::jobs::{
    JobInfo, JobRef, JobResult, JobSpec, LogChunk, LogFileRequest, LogRequest, PoolInfo, PoolRef,
    PoolSpec,
};
use crate::pb;

wire!(try JobResult => pb::JobResult);
wire!(
    JobSpec => pb::JobSpec,
    JobInfo => pb::JobInfo,
    PoolSpec => pb::PoolSpec,
    PoolInfo => pb::PoolInfo,
    JobRef => pb::JobRef,
    PoolRef => pb::PoolRef,
    LogRequest => pb::LogRequest,
    LogChunk => pb::LogChunk,
    LogFileRequest => pb::LogFileRequest,
    Vec<JobInfo> => pb::JobList,
    Vec<PoolInfo> => pb::PoolList,
    Empty => pb::Empty,
);

impl From<Empty> for pb::Empty {
    fn from(_: Empty) -> Self {
        pb::Empty {}
    }
}

impl From<pb::Empty> for Empty {
    fn from(_: pb::Empty) -> Self {
        Empty
    }
}

impl From<JobRef> for pb::JobRef {
    fn from(r: JobRef) -> Self {
        pb::JobRef { id: r.id }
    }
}

impl From<pb::JobRef> for JobRef {
    fn from(r: pb::JobRef) -> Self {
        JobRef { id: r.id }
    }
}

impl From<PoolRef> for pb::PoolRef {
    fn from(r: PoolRef) -> Self {
        pb::PoolRef { name: r.name }
    }
}

impl From<pb::PoolRef> for PoolRef {
    fn from(r: pb::PoolRef) -> Self {
        PoolRef { name: r.name }
    }
}

impl From<LogRequest> for pb::LogRequest {
    fn from(r: LogRequest) -> Self {
        pb::LogRequest {
            job: r.job,
            instance: r.instance,
            offset: r.offset,
        }
    }
}

impl From<pb::LogRequest> for LogRequest {
    fn from(r: pb::LogRequest) -> Self {
        LogRequest {
            job: r.job,
            instance: r.instance,
            offset: r.offset,
        }
    }
}

impl From<LogFileRequest> for pb::LogFileRequest {
    fn from(r: LogFileRequest) -> Self {
        pb::LogFileRequest {
            job: r.job,
            pid: r.pid,
            offset: r.offset,
            task: r.task,
        }
    }
}

impl From<pb::LogFileRequest> for LogFileRequest {
    fn from(r: pb::LogFileRequest) -> Self {
        LogFileRequest {
            job: r.job,
            pid: r.pid,
            offset: r.offset,
            task: r.task,
        }
    }
}

impl From<LogChunk> for pb::LogChunk {
    fn from(c: LogChunk) -> Self {
        pb::LogChunk {
            data: c.data,
            offset: c.offset,
            ended: c.ended,
        }
    }
}

impl From<pb::LogChunk> for LogChunk {
    fn from(c: pb::LogChunk) -> Self {
        LogChunk {
            data: c.data,
            offset: c.offset,
            ended: c.ended,
        }
    }
}

impl From<Vec<JobInfo>> for pb::JobList {
    fn from(jobs: Vec<JobInfo>) -> Self {
        pb::JobList {
            jobs: jobs.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<pb::JobList> for Vec<JobInfo> {
    fn from(l: pb::JobList) -> Self {
        l.jobs.into_iter().map(Into::into).collect()
    }
}

impl From<Vec<PoolInfo>> for pb::PoolList {
    fn from(pools: Vec<PoolInfo>) -> Self {
        pb::PoolList {
            pools: pools.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<pb::PoolList> for Vec<PoolInfo> {
    fn from(l: pb::PoolList) -> Self {
        l.pools.into_iter().map(Into::into).collect()
    }
}
