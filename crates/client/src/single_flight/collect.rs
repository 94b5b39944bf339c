//! A flight's upstream call: the request sent and its response read into
//! memory up to the cap (`fly`), its data frames gathered by `Collect`,
//! without a copy when one frame holds them all.
//!
//! Invariant: at most the cap plus one data frame is held in memory; a
//! response over the cap is handed on still streaming, the bytes read so
//! far in front.

use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use http_body::Body;
use http_body_util::BodyExt;
use tower::{Service, ServiceExt};

use super::flight::{Buffered, FlightOutput, Landed, SharedError};
use crate::{BoxError, PrefixedBody};

/// The upstream call of one flight, body read up to `cap`.
pub(super) async fn fly<S, ReqB, B>(
    service: S,
    request: http::Request<ReqB>,
    cap: usize,
) -> FlightOutput<B>
where
    S: Service<http::Request<ReqB>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    let shared = |e: BoxError| SharedError(Arc::new(e));
    let response = service
        .oneshot(request)
        .await
        .map_err(|e| shared(e.into()))?;
    let (parts, mut body) = response.into_parts();
    if body.size_hint().lower() > cap as u64 {
        let streaming = PrefixedBody::streaming(body);
        return Ok(Landed::TooLarge(Box::new(http::Response::from_parts(
            parts, streaming,
        ))));
    }
    let mut buf = Collect::default();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| shared(e.into()))?;
        match frame.into_data() {
            Ok(data) => {
                let over = buf.len() + data.remaining() > cap;
                buf.push(data);
                if over {
                    let rest = PrefixedBody::new(buf.finish(), body);
                    let response = http::Response::from_parts(parts, rest);
                    return Ok(Landed::TooLarge(Box::new(response)));
                }
            }
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(Box::new(t));
                }
            }
        }
    }
    Ok(Landed::Buffered(Buffered {
        head: parts,
        body: buf.finish(),
        trailers,
    }))
}

/// A body's data frames in memory. The usual single frame (`Full`, a
/// small hyper body) is kept as it came, without a copy.
#[derive(Default)]
struct Collect {
    first: Option<Bytes>,
    more: Option<BytesMut>,
}

impl Collect {
    fn len(&self) -> usize {
        self.more
            .as_ref()
            .map_or_else(|| self.first.as_ref().map_or(0, Bytes::len), BytesMut::len)
    }

    fn push(&mut self, mut data: impl Buf) {
        if let Some(more) = &mut self.more {
            while data.has_remaining() {
                let n = data.chunk().len();
                more.extend_from_slice(data.chunk());
                data.advance(n);
            }
            return;
        }
        let bytes = data.copy_to_bytes(data.remaining());
        match self.first.take() {
            None => self.first = Some(bytes),
            Some(first) => {
                let mut more = BytesMut::with_capacity(first.len() + bytes.len());
                more.extend_from_slice(&first);
                more.extend_from_slice(&bytes);
                self.more = Some(more);
            }
        }
    }

    fn finish(self) -> Bytes {
        match self.more {
            Some(more) => more.freeze(),
            None => self.first.unwrap_or_default(),
        }
    }
}
