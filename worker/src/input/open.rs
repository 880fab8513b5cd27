use std::io::{self, BufReader, Read};
use std::sync::mpsc;

use bytes::Bytes;
use flate2::read::MultiGzDecoder;

use super::InputError;

/// Bytes handed from a producer thread or task, read as a `Read`.
pub struct ChannelReader {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    cur: Bytes,
}

impl ChannelReader {
    pub fn new(rx: mpsc::Receiver<io::Result<Bytes>>) -> Self {
        ChannelReader {
            rx,
            cur: Bytes::new(),
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.recv() {
                Ok(Ok(b)) => self.cur = b,
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len());
        buf[..n].copy_from_slice(&self.cur[..n]);
        let _ = self.cur.split_to(n);
        Ok(n)
    }
}

const CHUNK: usize = 1 << 20;

/// Decompresses (if gzip) on a separate thread so that inflating and parsing overlap:
/// with one input the parse thread is never waiting on `read` for long.
fn pipelined<R: Read + Send + 'static>(name: String, raw: R) -> ChannelReader {
    let (tx, rx) = mpsc::sync_channel::<io::Result<Bytes>>(8);
    std::thread::Builder::new()
        .name("inflate".into())
        .spawn(move || {
            let mut raw = BufReader::with_capacity(CHUNK, raw);
            let gz = match peek_gzip(&mut raw) {
                Ok(g) => g,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let mut src: Box<dyn Read> = if gz {
                Box::new(MultiGzDecoder::new(raw))
            } else {
                Box::new(raw)
            };
            loop {
                let mut buf = vec![0u8; CHUNK];
                let mut filled = 0;
                // Fill whole chunks: fewer, larger messages.
                while filled < CHUNK {
                    match src.read(&mut buf[filled..]) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            let msg = if e.kind() == io::ErrorKind::UnexpectedEof {
                                format!("{name}: truncated gzip stream ({e})")
                            } else {
                                format!("{name}: {e}")
                            };
                            let _ = tx.send(Err(io::Error::new(e.kind(), msg)));
                            return;
                        }
                    }
                }
                if filled == 0 {
                    return;
                }
                buf.truncate(filled);
                if tx.send(Ok(Bytes::from(buf))).is_err() {
                    return;
                }
            }
        })
        .expect("spawn inflate thread");
    ChannelReader::new(rx)
}

fn peek_gzip<R: Read>(r: &mut BufReader<R>) -> io::Result<bool> {
    use std::io::BufRead;
    let buf = r.fill_buf()?;
    Ok(buf.len() >= 2 && buf[0] == 0x1f && buf[1] == 0x8b)
}

/// Opens an input (a local path or an object-store URL) as a stream of decompressed
/// bytes. Store objects are streamed by a task on `rt`, never fully buffered.
pub fn open_input(spec: &str, rt: &tokio::runtime::Handle) -> Result<ChannelReader, InputError> {
    if covmerge_storage::is_store_url(spec) {
        let (store, key) = covmerge_storage::open_object(spec).map_err(|e| InputError::Open {
            input: spec.to_string(),
            source: io::Error::other(e),
        })?;
        let (tx, rx) = mpsc::sync_channel::<io::Result<Bytes>>(8);
        let name = spec.to_string();
        rt.spawn(async move {
            use futures::StreamExt;
            let mut stream = match store.get_stream(&key).await {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send(Err(io::Error::other(e)));
                    return;
                }
            };
            while let Some(item) = stream.next().await {
                let item = item.map_err(|e| io::Error::other(format!("{name}: {e}")));
                let stop = item.is_err();
                let tx2 = tx.clone();
                // The channel is a std one; hand the blocking send to the blocking pool.
                let sent = tokio::task::spawn_blocking(move || tx2.send(item).is_ok()).await;
                if stop || !matches!(sent, Ok(true)) {
                    return;
                }
            }
        });
        Ok(pipelined(spec.to_string(), ChannelReader::new(rx)))
    } else {
        let f = std::fs::File::open(spec).map_err(|e| InputError::Open {
            input: spec.to_string(),
            source: e,
        })?;
        Ok(pipelined(spec.to_string(), f))
    }
}
