//! The agent's link to the head: dialing it (with the route toward it, which the object
//! service advertises), registering the node (`NodeHello`, again after a restart), and the
//! batches of the `Attach` stream.

use super::*;

/// Dials the head until it answers or `deadline` passes.
pub(super) async fn connect(
    addr: &str,
    endpoint: &Endpoint,
    deadline: Instant,
) -> Result<Channel, AgentError> {
    starling_proto::security::dial(endpoint, deadline.into_std())
        .await
        .map_err(|_| AgentError::HeadUnreachable {
            addr: addr.to_string(),
        })
}

/// One attempt to dial the head, given up at `deadline`.
pub(super) async fn connect_once(
    endpoint: &Endpoint,
    deadline: Instant,
) -> Result<Channel, AgentError> {
    starling_proto::security::dial_once(endpoint, deadline.into_std())
        .await
        .map_err(|why| AgentError::Refused {
            message: format!("cannot connect: {why}"),
        })
}

/// This host's IP on its route to the head (loopback if the head's name does not resolve):
/// where the object service listens by default, and what it advertises when bound to all
/// interfaces (`0.0.0.0`).
pub(super) async fn route_to(uri: &str) -> IpAddr {
    let mut ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    if let Ok(parsed) = uri.parse::<tonic::transport::Uri>() {
        if let Some(host) = parsed.host() {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let port = parsed.port_u16().unwrap_or(80);
            if let Ok(Some(head)) = tokio::net::lookup_host((host, port))
                .await
                .map(|mut it| it.next())
            {
                // Connecting a UDP socket sends nothing; it only asks the kernel for the route.
                let any: SocketAddr = if head.is_ipv4() {
                    (Ipv4Addr::UNSPECIFIED, 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                if let Ok(sock) = std::net::UdpSocket::bind(any) {
                    if sock.connect(head).is_ok() {
                        if let Ok(local) = sock.local_addr() {
                            ip = local.ip();
                        }
                    }
                }
            }
        }
    }
    ip
}

/// A registration with a head: the node id, the node stream both ways, and ops that came
/// with the id (handled first).
pub(super) struct Session {
    pub(super) node: NodeId,
    pub(super) outbound: mpsc::UnboundedSender<NodeBatch>,
    pub(super) inbound: Streaming<HeadToNodeBatch>,
    pub(super) early: Vec<HeadToNodeOp>,
}

/// The head's client, with the cluster token on every call.
pub(super) type HeadClient = starling_proto::rpc::head_client::HeadClient<AuthChannel>;

/// Opens `Attach` with `hello` and waits for the node id, until `deadline`.
pub(super) async fn register(
    addr: &str,
    mut head: HeadClient,
    hello: NodeHello,
    deadline: Instant,
) -> Result<Session, AgentError> {
    let (outbound, outbound_rx) = mpsc::unbounded_channel();
    let _ = outbound.send(batch(vec![NodeOp::Hello(hello)]));
    let refused = |message: String| AgentError::Refused { message };
    let status_error = |status: tonic::Status| match status.code() {
        tonic::Code::Unauthenticated => AgentError::Unauthenticated {
            addr: addr.to_string(),
            message: status.message().to_string(),
        },
        code => refused(format!("{code:?}: {}", status.message())),
    };
    let attach = head.attach(UnboundedReceiverStream::new(outbound_rx));
    let mut inbound = match tokio::time::timeout_at(deadline, attach).await {
        Err(_) => {
            return Err(AgentError::HeadUnreachable {
                addr: addr.to_string(),
            })
        }
        Ok(Err(status)) if status.code() == tonic::Code::Unavailable => {
            return Err(AgentError::HeadUnreachable {
                addr: addr.to_string(),
            })
        }
        Ok(Err(status)) => return Err(status_error(status)),
        Ok(Ok(response)) => response.into_inner(),
    };
    let mut early = Vec::new();
    loop {
        let next = tokio::time::timeout_at(deadline, inbound.message())
            .await
            .map_err(|_| refused("no node id before the connect deadline".to_string()))?;
        match next {
            Ok(Some(b)) => {
                let mut node = None;
                for op in b.ops {
                    match op {
                        HeadToNodeOp::NodeId(id) if node.is_none() => node = Some(id),
                        other => early.push(other),
                    }
                }
                if let Some(node) = node {
                    return Ok(Session {
                        node,
                        outbound,
                        inbound,
                        early,
                    });
                }
            }
            Ok(None) => {
                return Err(refused(
                    "the head closed the stream before assigning a node id".into(),
                ))
            }
            Err(status) => return Err(status_error(status)),
        }
    }
}

pub(super) fn batch(ops: Vec<NodeOp>) -> NodeBatch {
    NodeBatch { ops }
}
