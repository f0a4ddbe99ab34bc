/// Generated client implementations.
pub mod head_client {
    #![allow(
        unused_variables,
        dead_code,
        missing_docs,
        clippy::wildcard_imports,
        clippy::let_unit_value,
    )]
    use tonic::codegen::*;
    use tonic::codegen::http::Uri;
    #[derive(Debug, Clone)]
    pub struct HeadClient<T> {
        inner: tonic::client::Grpc<T>,
    }
    impl HeadClient<tonic::transport::Channel> {
        /// Attempt to create a new client by connecting to a given endpoint.
        pub async fn connect<D>(dst: D) -> Result<Self, tonic::transport::Error>
        where
            D: TryInto<tonic::transport::Endpoint>,
            D::Error: Into<StdError>,
        {
            let conn = tonic::transport::Endpoint::new(dst)?.connect().await?;
            Ok(Self::new(conn))
        }
    }
    impl<T> HeadClient<T>
    where
        T: tonic::client::GrpcService<tonic::body::BoxBody>,
        T::Error: Into<StdError>,
        T::ResponseBody: Body<Data = Bytes> + std::marker::Send + 'static,
        <T::ResponseBody as Body>::Error: Into<StdError> + std::marker::Send,
    {
        pub fn new(inner: T) -> Self {
            let inner = tonic::client::Grpc::new(inner);
            Self { inner }
        }
        pub fn with_origin(inner: T, origin: Uri) -> Self {
            let inner = tonic::client::Grpc::with_origin(inner, origin);
            Self { inner }
        }
        pub fn with_interceptor<F>(
            inner: T,
            interceptor: F,
        ) -> HeadClient<InterceptedService<T, F>>
        where
            F: tonic::service::Interceptor,
            T::ResponseBody: Default,
            T: tonic::codegen::Service<
                http::Request<tonic::body::BoxBody>,
                Response = http::Response<
                    <T as tonic::client::GrpcService<tonic::body::BoxBody>>::ResponseBody,
                >,
            >,
            <T as tonic::codegen::Service<
                http::Request<tonic::body::BoxBody>,
            >>::Error: Into<StdError> + std::marker::Send + std::marker::Sync,
        {
            HeadClient::new(InterceptedService::new(inner, interceptor))
        }
        /// Compress requests with the given encoding.
        ///
        /// This requires the server to support it otherwise it might respond with an
        /// error.
        #[must_use]
        pub fn send_compressed(mut self, encoding: CompressionEncoding) -> Self {
            self.inner = self.inner.send_compressed(encoding);
            self
        }
        /// Enable decompressing responses.
        #[must_use]
        pub fn accept_compressed(mut self, encoding: CompressionEncoding) -> Self {
            self.inner = self.inner.accept_compressed(encoding);
            self
        }
        /// Limits the maximum size of a decoded message.
        ///
        /// Default: `4MB`
        #[must_use]
        pub fn max_decoding_message_size(mut self, limit: usize) -> Self {
            self.inner = self.inner.max_decoding_message_size(limit);
            self
        }
        /// Limits the maximum size of an encoded message.
        ///
        /// Default: `usize::MAX`
        #[must_use]
        pub fn max_encoding_message_size(mut self, limit: usize) -> Self {
            self.inner = self.inner.max_encoding_message_size(limit);
            self
        }
        pub async fn session(
            &mut self,
            request: impl tonic::IntoStreamingRequest<
                Message = crate::session::ClientBatch,
            >,
        ) -> std::result::Result<
            tonic::Response<tonic::codec::Streaming<crate::session::HeadBatch>>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static("/starling.v1.Head/Session");
            let mut req = request.into_streaming_request();
            req.extensions_mut().insert(GrpcMethod::new("starling.v1.Head", "Session"));
            self.inner.streaming(req, path, codec).await
        }
        pub async fn attach(
            &mut self,
            request: impl tonic::IntoStreamingRequest<Message = crate::node::NodeBatch>,
        ) -> std::result::Result<
            tonic::Response<tonic::codec::Streaming<crate::node::HeadToNodeBatch>>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static("/starling.v1.Head/Attach");
            let mut req = request.into_streaming_request();
            req.extensions_mut().insert(GrpcMethod::new("starling.v1.Head", "Attach"));
            self.inner.streaming(req, path, codec).await
        }
        pub async fn put_binary(
            &mut self,
            request: impl tonic::IntoStreamingRequest<Message = crate::chunks::Chunk>,
        ) -> std::result::Result<
            tonic::Response<crate::chunks::BinaryRef>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/PutBinary",
            );
            let mut req = request.into_streaming_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "PutBinary"));
            self.inner.client_streaming(req, path, codec).await
        }
        pub async fn get_binary(
            &mut self,
            request: impl tonic::IntoRequest<crate::chunks::BinaryRef>,
        ) -> std::result::Result<
            tonic::Response<tonic::codec::Streaming<crate::chunks::Chunk>>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/GetBinary",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "GetBinary"));
            self.inner.server_streaming(req, path, codec).await
        }
        pub async fn fetch(
            &mut self,
            request: impl tonic::IntoRequest<crate::chunks::FetchRequest>,
        ) -> std::result::Result<
            tonic::Response<tonic::codec::Streaming<crate::chunks::Chunk>>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static("/starling.v1.Head/Fetch");
            let mut req = request.into_request();
            req.extensions_mut().insert(GrpcMethod::new("starling.v1.Head", "Fetch"));
            self.inner.server_streaming(req, path, codec).await
        }
        pub async fn status(
            &mut self,
            request: impl tonic::IntoRequest<crate::status::StatusRequest>,
        ) -> std::result::Result<
            tonic::Response<crate::status::StatusReply>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static("/starling.v1.Head/Status");
            let mut req = request.into_request();
            req.extensions_mut().insert(GrpcMethod::new("starling.v1.Head", "Status"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn pending_reason(
            &mut self,
            request: impl tonic::IntoRequest<crate::status::PendingRequest>,
        ) -> std::result::Result<
            tonic::Response<crate::status::PendingReply>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/PendingReason",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "PendingReason"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_actor(
            &mut self,
            request: impl tonic::IntoRequest<crate::status::ActorNameRequest>,
        ) -> std::result::Result<
            tonic::Response<crate::status::ActorNameReply>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/GetActor",
            );
            let mut req = request.into_request();
            req.extensions_mut().insert(GrpcMethod::new("starling.v1.Head", "GetActor"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn submit_job(
            &mut self,
            request: impl tonic::IntoRequest<crate::jobs::JobSpec>,
        ) -> std::result::Result<tonic::Response<crate::jobs::JobInfo>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/SubmitJob",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "SubmitJob"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn list_jobs(
            &mut self,
            request: impl tonic::IntoRequest<crate::rpc::Empty>,
        ) -> std::result::Result<
            tonic::Response<::std::vec::Vec<crate::jobs::JobInfo>>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/ListJobs",
            );
            let mut req = request.into_request();
            req.extensions_mut().insert(GrpcMethod::new("starling.v1.Head", "ListJobs"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn get_job(
            &mut self,
            request: impl tonic::IntoRequest<crate::jobs::JobRef>,
        ) -> std::result::Result<tonic::Response<crate::jobs::JobInfo>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static("/starling.v1.Head/GetJob");
            let mut req = request.into_request();
            req.extensions_mut().insert(GrpcMethod::new("starling.v1.Head", "GetJob"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn cancel_job(
            &mut self,
            request: impl tonic::IntoRequest<crate::jobs::JobRef>,
        ) -> std::result::Result<tonic::Response<crate::jobs::JobInfo>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/CancelJob",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "CancelJob"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn delete_job(
            &mut self,
            request: impl tonic::IntoRequest<crate::jobs::JobRef>,
        ) -> std::result::Result<tonic::Response<crate::rpc::Empty>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/DeleteJob",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "DeleteJob"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn job_logs(
            &mut self,
            request: impl tonic::IntoRequest<crate::jobs::LogRequest>,
        ) -> std::result::Result<tonic::Response<crate::jobs::LogChunk>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static("/starling.v1.Head/JobLogs");
            let mut req = request.into_request();
            req.extensions_mut().insert(GrpcMethod::new("starling.v1.Head", "JobLogs"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn set_job_result(
            &mut self,
            request: impl tonic::IntoRequest<crate::jobs::JobResult>,
        ) -> std::result::Result<tonic::Response<crate::rpc::Empty>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/SetJobResult",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "SetJobResult"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn create_pool(
            &mut self,
            request: impl tonic::IntoRequest<crate::jobs::PoolSpec>,
        ) -> std::result::Result<tonic::Response<crate::jobs::PoolInfo>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/CreatePool",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "CreatePool"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn list_pools(
            &mut self,
            request: impl tonic::IntoRequest<crate::rpc::Empty>,
        ) -> std::result::Result<
            tonic::Response<::std::vec::Vec<crate::jobs::PoolInfo>>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/ListPools",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "ListPools"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn describe_pool(
            &mut self,
            request: impl tonic::IntoRequest<crate::jobs::PoolRef>,
        ) -> std::result::Result<tonic::Response<crate::jobs::PoolInfo>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/DescribePool",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "DescribePool"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn delete_pool(
            &mut self,
            request: impl tonic::IntoRequest<crate::jobs::PoolRef>,
        ) -> std::result::Result<tonic::Response<crate::rpc::Empty>, tonic::Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/DeletePool",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "DeletePool"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn list_tasks(
            &mut self,
            request: impl tonic::IntoRequest<crate::state::TaskQuery>,
        ) -> std::result::Result<
            tonic::Response<crate::state::TaskList>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/ListTasks",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "ListTasks"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn list_objects(
            &mut self,
            request: impl tonic::IntoRequest<crate::state::TaskQuery>,
        ) -> std::result::Result<
            tonic::Response<crate::state::StateList>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/ListObjects",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "ListObjects"));
            self.inner.unary(req, path, codec).await
        }
        pub async fn list_workers(
            &mut self,
            request: impl tonic::IntoRequest<crate::state::TaskQuery>,
        ) -> std::result::Result<
            tonic::Response<crate::state::StateList>,
            tonic::Status,
        > {
            self.inner
                .ready()
                .await
                .map_err(|e| {
                    tonic::Status::unknown(
                        format!("Service was not ready: {}", e.into()),
                    )
                })?;
            let codec = crate::rpc::WireCodec::default();
            let path = http::uri::PathAndQuery::from_static(
                "/starling.v1.Head/ListWorkers",
            );
            let mut req = request.into_request();
            req.extensions_mut()
                .insert(GrpcMethod::new("starling.v1.Head", "ListWorkers"));
            self.inner.unary(req, path, codec).await
        }
    }
}
/// Generated server implementations.
pub mod head_server {
    #![allow(
        unused_variables,
        dead_code,
        missing_docs,
        clippy::wildcard_imports,
        clippy::let_unit_value,
    )]
    use tonic::codegen::*;
    /// Generated trait containing gRPC methods that should be implemented for use with HeadServer.
    #[async_trait]
    pub trait Head: std::marker::Send + std::marker::Sync + 'static {
        /// Server streaming response type for the Session method.
        type SessionStream: tonic::codegen::tokio_stream::Stream<
                Item = std::result::Result<crate::session::HeadBatch, tonic::Status>,
            >
            + std::marker::Send
            + 'static;
        async fn session(
            &self,
            request: tonic::Request<tonic::Streaming<crate::session::ClientBatch>>,
        ) -> std::result::Result<tonic::Response<Self::SessionStream>, tonic::Status>;
        /// Server streaming response type for the Attach method.
        type AttachStream: tonic::codegen::tokio_stream::Stream<
                Item = std::result::Result<crate::node::HeadToNodeBatch, tonic::Status>,
            >
            + std::marker::Send
            + 'static;
        async fn attach(
            &self,
            request: tonic::Request<tonic::Streaming<crate::node::NodeBatch>>,
        ) -> std::result::Result<tonic::Response<Self::AttachStream>, tonic::Status>;
        async fn put_binary(
            &self,
            request: tonic::Request<tonic::Streaming<crate::chunks::Chunk>>,
        ) -> std::result::Result<
            tonic::Response<crate::chunks::BinaryRef>,
            tonic::Status,
        >;
        /// Server streaming response type for the GetBinary method.
        type GetBinaryStream: tonic::codegen::tokio_stream::Stream<
                Item = std::result::Result<crate::chunks::Chunk, tonic::Status>,
            >
            + std::marker::Send
            + 'static;
        async fn get_binary(
            &self,
            request: tonic::Request<crate::chunks::BinaryRef>,
        ) -> std::result::Result<tonic::Response<Self::GetBinaryStream>, tonic::Status>;
        /// Server streaming response type for the Fetch method.
        type FetchStream: tonic::codegen::tokio_stream::Stream<
                Item = std::result::Result<crate::chunks::Chunk, tonic::Status>,
            >
            + std::marker::Send
            + 'static;
        async fn fetch(
            &self,
            request: tonic::Request<crate::chunks::FetchRequest>,
        ) -> std::result::Result<tonic::Response<Self::FetchStream>, tonic::Status>;
        async fn status(
            &self,
            request: tonic::Request<crate::status::StatusRequest>,
        ) -> std::result::Result<
            tonic::Response<crate::status::StatusReply>,
            tonic::Status,
        >;
        async fn pending_reason(
            &self,
            request: tonic::Request<crate::status::PendingRequest>,
        ) -> std::result::Result<
            tonic::Response<crate::status::PendingReply>,
            tonic::Status,
        >;
        async fn get_actor(
            &self,
            request: tonic::Request<crate::status::ActorNameRequest>,
        ) -> std::result::Result<
            tonic::Response<crate::status::ActorNameReply>,
            tonic::Status,
        >;
        async fn submit_job(
            &self,
            request: tonic::Request<crate::jobs::JobSpec>,
        ) -> std::result::Result<tonic::Response<crate::jobs::JobInfo>, tonic::Status>;
        async fn list_jobs(
            &self,
            request: tonic::Request<crate::rpc::Empty>,
        ) -> std::result::Result<
            tonic::Response<::std::vec::Vec<crate::jobs::JobInfo>>,
            tonic::Status,
        >;
        async fn get_job(
            &self,
            request: tonic::Request<crate::jobs::JobRef>,
        ) -> std::result::Result<tonic::Response<crate::jobs::JobInfo>, tonic::Status>;
        async fn cancel_job(
            &self,
            request: tonic::Request<crate::jobs::JobRef>,
        ) -> std::result::Result<tonic::Response<crate::jobs::JobInfo>, tonic::Status>;
        async fn delete_job(
            &self,
            request: tonic::Request<crate::jobs::JobRef>,
        ) -> std::result::Result<tonic::Response<crate::rpc::Empty>, tonic::Status>;
        async fn job_logs(
            &self,
            request: tonic::Request<crate::jobs::LogRequest>,
        ) -> std::result::Result<tonic::Response<crate::jobs::LogChunk>, tonic::Status>;
        async fn set_job_result(
            &self,
            request: tonic::Request<crate::jobs::JobResult>,
        ) -> std::result::Result<tonic::Response<crate::rpc::Empty>, tonic::Status>;
        async fn create_pool(
            &self,
            request: tonic::Request<crate::jobs::PoolSpec>,
        ) -> std::result::Result<tonic::Response<crate::jobs::PoolInfo>, tonic::Status>;
        async fn list_pools(
            &self,
            request: tonic::Request<crate::rpc::Empty>,
        ) -> std::result::Result<
            tonic::Response<::std::vec::Vec<crate::jobs::PoolInfo>>,
            tonic::Status,
        >;
        async fn describe_pool(
            &self,
            request: tonic::Request<crate::jobs::PoolRef>,
        ) -> std::result::Result<tonic::Response<crate::jobs::PoolInfo>, tonic::Status>;
        async fn delete_pool(
            &self,
            request: tonic::Request<crate::jobs::PoolRef>,
        ) -> std::result::Result<tonic::Response<crate::rpc::Empty>, tonic::Status>;
        async fn list_tasks(
            &self,
            request: tonic::Request<crate::state::TaskQuery>,
        ) -> std::result::Result<tonic::Response<crate::state::TaskList>, tonic::Status>;
        async fn list_objects(
            &self,
            request: tonic::Request<crate::state::TaskQuery>,
        ) -> std::result::Result<
            tonic::Response<crate::state::StateList>,
            tonic::Status,
        >;
        async fn list_workers(
            &self,
            request: tonic::Request<crate::state::TaskQuery>,
        ) -> std::result::Result<
            tonic::Response<crate::state::StateList>,
            tonic::Status,
        >;
    }
    #[derive(Debug)]
    pub struct HeadServer<T> {
        inner: Arc<T>,
        accept_compression_encodings: EnabledCompressionEncodings,
        send_compression_encodings: EnabledCompressionEncodings,
        max_decoding_message_size: Option<usize>,
        max_encoding_message_size: Option<usize>,
    }
    impl<T> HeadServer<T> {
        pub fn new(inner: T) -> Self {
            Self::from_arc(Arc::new(inner))
        }
        pub fn from_arc(inner: Arc<T>) -> Self {
            Self {
                inner,
                accept_compression_encodings: Default::default(),
                send_compression_encodings: Default::default(),
                max_decoding_message_size: None,
                max_encoding_message_size: None,
            }
        }
        pub fn with_interceptor<F>(
            inner: T,
            interceptor: F,
        ) -> InterceptedService<Self, F>
        where
            F: tonic::service::Interceptor,
        {
            InterceptedService::new(Self::new(inner), interceptor)
        }
        /// Enable decompressing requests with the given encoding.
        #[must_use]
        pub fn accept_compressed(mut self, encoding: CompressionEncoding) -> Self {
            self.accept_compression_encodings.enable(encoding);
            self
        }
        /// Compress responses with the given encoding, if the client supports it.
        #[must_use]
        pub fn send_compressed(mut self, encoding: CompressionEncoding) -> Self {
            self.send_compression_encodings.enable(encoding);
            self
        }
        /// Limits the maximum size of a decoded message.
        ///
        /// Default: `4MB`
        #[must_use]
        pub fn max_decoding_message_size(mut self, limit: usize) -> Self {
            self.max_decoding_message_size = Some(limit);
            self
        }
        /// Limits the maximum size of an encoded message.
        ///
        /// Default: `usize::MAX`
        #[must_use]
        pub fn max_encoding_message_size(mut self, limit: usize) -> Self {
            self.max_encoding_message_size = Some(limit);
            self
        }
    }
    impl<T, B> tonic::codegen::Service<http::Request<B>> for HeadServer<T>
    where
        T: Head,
        B: Body + std::marker::Send + 'static,
        B::Error: Into<StdError> + std::marker::Send + 'static,
    {
        type Response = http::Response<tonic::body::BoxBody>;
        type Error = std::convert::Infallible;
        type Future = BoxFuture<Self::Response, Self::Error>;
        fn poll_ready(
            &mut self,
            _cx: &mut Context<'_>,
        ) -> Poll<std::result::Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, req: http::Request<B>) -> Self::Future {
            match req.uri().path() {
                "/starling.v1.Head/Session" => {
                    #[allow(non_camel_case_types)]
                    struct SessionSvc<T: Head>(pub Arc<T>);
                    impl<
                        T: Head,
                    > tonic::server::StreamingService<crate::session::ClientBatch>
                    for SessionSvc<T> {
                        type Response = crate::session::HeadBatch;
                        type ResponseStream = T::SessionStream;
                        type Future = BoxFuture<
                            tonic::Response<Self::ResponseStream>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<
                                tonic::Streaming<crate::session::ClientBatch>,
                            >,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::session(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = SessionSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.streaming(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/Attach" => {
                    #[allow(non_camel_case_types)]
                    struct AttachSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::StreamingService<crate::node::NodeBatch>
                    for AttachSvc<T> {
                        type Response = crate::node::HeadToNodeBatch;
                        type ResponseStream = T::AttachStream;
                        type Future = BoxFuture<
                            tonic::Response<Self::ResponseStream>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<
                                tonic::Streaming<crate::node::NodeBatch>,
                            >,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::attach(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = AttachSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.streaming(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/PutBinary" => {
                    #[allow(non_camel_case_types)]
                    struct PutBinarySvc<T: Head>(pub Arc<T>);
                    impl<
                        T: Head,
                    > tonic::server::ClientStreamingService<crate::chunks::Chunk>
                    for PutBinarySvc<T> {
                        type Response = crate::chunks::BinaryRef;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<
                                tonic::Streaming<crate::chunks::Chunk>,
                            >,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::put_binary(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = PutBinarySvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.client_streaming(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/GetBinary" => {
                    #[allow(non_camel_case_types)]
                    struct GetBinarySvc<T: Head>(pub Arc<T>);
                    impl<
                        T: Head,
                    > tonic::server::ServerStreamingService<crate::chunks::BinaryRef>
                    for GetBinarySvc<T> {
                        type Response = crate::chunks::Chunk;
                        type ResponseStream = T::GetBinaryStream;
                        type Future = BoxFuture<
                            tonic::Response<Self::ResponseStream>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::chunks::BinaryRef>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::get_binary(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetBinarySvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.server_streaming(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/Fetch" => {
                    #[allow(non_camel_case_types)]
                    struct FetchSvc<T: Head>(pub Arc<T>);
                    impl<
                        T: Head,
                    > tonic::server::ServerStreamingService<crate::chunks::FetchRequest>
                    for FetchSvc<T> {
                        type Response = crate::chunks::Chunk;
                        type ResponseStream = T::FetchStream;
                        type Future = BoxFuture<
                            tonic::Response<Self::ResponseStream>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::chunks::FetchRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::fetch(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = FetchSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.server_streaming(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/Status" => {
                    #[allow(non_camel_case_types)]
                    struct StatusSvc<T: Head>(pub Arc<T>);
                    impl<
                        T: Head,
                    > tonic::server::UnaryService<crate::status::StatusRequest>
                    for StatusSvc<T> {
                        type Response = crate::status::StatusReply;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::status::StatusRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::status(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = StatusSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/PendingReason" => {
                    #[allow(non_camel_case_types)]
                    struct PendingReasonSvc<T: Head>(pub Arc<T>);
                    impl<
                        T: Head,
                    > tonic::server::UnaryService<crate::status::PendingRequest>
                    for PendingReasonSvc<T> {
                        type Response = crate::status::PendingReply;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::status::PendingRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::pending_reason(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = PendingReasonSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/GetActor" => {
                    #[allow(non_camel_case_types)]
                    struct GetActorSvc<T: Head>(pub Arc<T>);
                    impl<
                        T: Head,
                    > tonic::server::UnaryService<crate::status::ActorNameRequest>
                    for GetActorSvc<T> {
                        type Response = crate::status::ActorNameReply;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::status::ActorNameRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::get_actor(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetActorSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/SubmitJob" => {
                    #[allow(non_camel_case_types)]
                    struct SubmitJobSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::jobs::JobSpec>
                    for SubmitJobSvc<T> {
                        type Response = crate::jobs::JobInfo;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::jobs::JobSpec>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::submit_job(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = SubmitJobSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/ListJobs" => {
                    #[allow(non_camel_case_types)]
                    struct ListJobsSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::rpc::Empty>
                    for ListJobsSvc<T> {
                        type Response = ::std::vec::Vec<crate::jobs::JobInfo>;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::rpc::Empty>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::list_jobs(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = ListJobsSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/GetJob" => {
                    #[allow(non_camel_case_types)]
                    struct GetJobSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::jobs::JobRef>
                    for GetJobSvc<T> {
                        type Response = crate::jobs::JobInfo;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::jobs::JobRef>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::get_job(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = GetJobSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/CancelJob" => {
                    #[allow(non_camel_case_types)]
                    struct CancelJobSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::jobs::JobRef>
                    for CancelJobSvc<T> {
                        type Response = crate::jobs::JobInfo;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::jobs::JobRef>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::cancel_job(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = CancelJobSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/DeleteJob" => {
                    #[allow(non_camel_case_types)]
                    struct DeleteJobSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::jobs::JobRef>
                    for DeleteJobSvc<T> {
                        type Response = crate::rpc::Empty;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::jobs::JobRef>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::delete_job(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = DeleteJobSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/JobLogs" => {
                    #[allow(non_camel_case_types)]
                    struct JobLogsSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::jobs::LogRequest>
                    for JobLogsSvc<T> {
                        type Response = crate::jobs::LogChunk;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::jobs::LogRequest>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::job_logs(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = JobLogsSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/SetJobResult" => {
                    #[allow(non_camel_case_types)]
                    struct SetJobResultSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::jobs::JobResult>
                    for SetJobResultSvc<T> {
                        type Response = crate::rpc::Empty;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::jobs::JobResult>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::set_job_result(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = SetJobResultSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/CreatePool" => {
                    #[allow(non_camel_case_types)]
                    struct CreatePoolSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::jobs::PoolSpec>
                    for CreatePoolSvc<T> {
                        type Response = crate::jobs::PoolInfo;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::jobs::PoolSpec>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::create_pool(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = CreatePoolSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/ListPools" => {
                    #[allow(non_camel_case_types)]
                    struct ListPoolsSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::rpc::Empty>
                    for ListPoolsSvc<T> {
                        type Response = ::std::vec::Vec<crate::jobs::PoolInfo>;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::rpc::Empty>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::list_pools(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = ListPoolsSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/DescribePool" => {
                    #[allow(non_camel_case_types)]
                    struct DescribePoolSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::jobs::PoolRef>
                    for DescribePoolSvc<T> {
                        type Response = crate::jobs::PoolInfo;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::jobs::PoolRef>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::describe_pool(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = DescribePoolSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/DeletePool" => {
                    #[allow(non_camel_case_types)]
                    struct DeletePoolSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::jobs::PoolRef>
                    for DeletePoolSvc<T> {
                        type Response = crate::rpc::Empty;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::jobs::PoolRef>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::delete_pool(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = DeletePoolSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/ListTasks" => {
                    #[allow(non_camel_case_types)]
                    struct ListTasksSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::state::TaskQuery>
                    for ListTasksSvc<T> {
                        type Response = crate::state::TaskList;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::state::TaskQuery>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::list_tasks(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = ListTasksSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/ListObjects" => {
                    #[allow(non_camel_case_types)]
                    struct ListObjectsSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::state::TaskQuery>
                    for ListObjectsSvc<T> {
                        type Response = crate::state::StateList;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::state::TaskQuery>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::list_objects(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = ListObjectsSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                "/starling.v1.Head/ListWorkers" => {
                    #[allow(non_camel_case_types)]
                    struct ListWorkersSvc<T: Head>(pub Arc<T>);
                    impl<T: Head> tonic::server::UnaryService<crate::state::TaskQuery>
                    for ListWorkersSvc<T> {
                        type Response = crate::state::StateList;
                        type Future = BoxFuture<
                            tonic::Response<Self::Response>,
                            tonic::Status,
                        >;
                        fn call(
                            &mut self,
                            request: tonic::Request<crate::state::TaskQuery>,
                        ) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            let fut = async move {
                                <T as Head>::list_workers(&inner, request).await
                            };
                            Box::pin(fut)
                        }
                    }
                    let accept_compression_encodings = self.accept_compression_encodings;
                    let send_compression_encodings = self.send_compression_encodings;
                    let max_decoding_message_size = self.max_decoding_message_size;
                    let max_encoding_message_size = self.max_encoding_message_size;
                    let inner = self.inner.clone();
                    let fut = async move {
                        let method = ListWorkersSvc(inner);
                        let codec = crate::rpc::WireCodec::default();
                        let mut grpc = tonic::server::Grpc::new(codec)
                            .apply_compression_config(
                                accept_compression_encodings,
                                send_compression_encodings,
                            )
                            .apply_max_message_size_config(
                                max_decoding_message_size,
                                max_encoding_message_size,
                            );
                        let res = grpc.unary(method, req).await;
                        Ok(res)
                    };
                    Box::pin(fut)
                }
                _ => {
                    Box::pin(async move {
                        let mut response = http::Response::new(empty_body());
                        let headers = response.headers_mut();
                        headers
                            .insert(
                                tonic::Status::GRPC_STATUS,
                                (tonic::Code::Unimplemented as i32).into(),
                            );
                        headers
                            .insert(
                                http::header::CONTENT_TYPE,
                                tonic::metadata::GRPC_CONTENT_TYPE,
                            );
                        Ok(response)
                    })
                }
            }
        }
    }
    impl<T> Clone for HeadServer<T> {
        fn clone(&self) -> Self {
            let inner = self.inner.clone();
            Self {
                inner,
                accept_compression_encodings: self.accept_compression_encodings,
                send_compression_encodings: self.send_compression_encodings,
                max_decoding_message_size: self.max_decoding_message_size,
                max_encoding_message_size: self.max_encoding_message_size,
            }
        }
    }
    /// Generated gRPC service name
    pub const SERVICE_NAME: &str = "starling.v1.Head";
    impl<T> tonic::server::NamedService for HeadServer<T> {
        const NAME: &'static str = SERVICE_NAME;
    }
}
