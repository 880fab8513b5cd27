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

/// A decompressed stream whose errors name the input (and say "truncated gzip stream"
/// when a gzip member ends early).
struct Decoded {
    name: String,
    src: Box<dyn Read + Send>,
}

impl Decoded {
    fn new<R: Read + Send + 'static>(name: String, raw: R) -> io::Result<Self> {
        let mut raw = BufReader::with_capacity(CHUNK, raw);
        let src: Box<dyn Read + Send> = if peek_gzip(&mut raw)? {
            Box::new(MultiGzDecoder::new(raw))
        } else {
            Box::new(raw)
        };
        Ok(Decoded { name, src })
    }
}

impl Read for Decoded {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.src.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::Interrupted {
                return e;
            }
            let msg = if e.kind() == io::ErrorKind::UnexpectedEof {
                format!("{}: truncated gzip stream ({e})", self.name)
            } else {
                format!("{}: {e}", self.name)
            };
            io::Error::new(e.kind(), msg)
        })
    }
}

/// Decompresses (if gzip) on a separate thread so that inflating and parsing overlap:
/// with one input the parse thread is never waiting on `read` for long.
fn pipelined<R: Read + Send + 'static>(name: String, raw: R) -> ChannelReader {
    let (tx, rx) = mpsc::sync_channel::<io::Result<Bytes>>(8);
    std::thread::Builder::new()
        .name("inflate".into())
        .spawn(move || {
            let mut src = match Decoded::new(name, raw) {
                Ok(d) => d,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
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
                            let _ = tx.send(Err(e));
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

/// How an input is decompressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inflate {
    /// On a thread of its own, overlapping the parse (for workers with spare cores).
    Pipelined,
    /// On the reading thread (one-core workers: no hand-off).
    Inline,
}

fn peek_gzip<R: Read>(r: &mut BufReader<R>) -> io::Result<bool> {
    use std::io::BufRead;
    let buf = r.fill_buf()?;
    Ok(buf.len() >= 2 && buf[0] == 0x1f && buf[1] == 0x8b)
}

/// Opens an input (a local path or an object-store URL) as a stream of decompressed
/// bytes. Store objects are streamed by a task on `rt`, never fully buffered.
pub fn open_input(
    spec: &str,
    rt: &tokio::runtime::Handle,
    inflate: Inflate,
) -> Result<Box<dyn Read + Send>, InputError> {
    let decode = |raw: Box<dyn Read + Send>| -> Result<Box<dyn Read + Send>, InputError> {
        Ok(match inflate {
            Inflate::Pipelined => Box::new(pipelined(spec.to_string(), raw)),
            Inflate::Inline => {
                Box::new(
                    Decoded::new(spec.to_string(), raw).map_err(|e| InputError::Open {
                        input: spec.to_string(),
                        source: e,
                    })?,
                )
            }
        })
    };
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
        decode(Box::new(ChannelReader::new(rx)))
    } else {
        let f = std::fs::File::open(spec).map_err(|e| InputError::Open {
            input: spec.to_string(),
            source: e,
        })?;
        decode(Box::new(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{write::GzEncoder, Compression};
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn read_all(path: &str, inflate: Inflate) -> io::Result<Vec<u8>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut r = open_input(path, rt.handle(), inflate).map_err(io::Error::other)?;
        let mut out = Vec::new();
        r.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn inline_and_pipelined_read_the_same_bytes_and_name_a_truncated_input() {
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..200_000)
            .flat_map(|i| format!("row {i},{}\n", i * 7).into_bytes())
            .collect();
        // Two gzip members, as concatenated exports are.
        let mut two = gz(&text[..text.len() / 2]);
        two.extend(gz(&text[text.len() / 2..]));
        let good = dir.path().join("good.csv.gz");
        std::fs::write(&good, &two).unwrap();
        let plain = dir.path().join("plain.csv");
        std::fs::write(&plain, &text).unwrap();
        let cut = dir.path().join("cut.csv.gz");
        std::fs::write(&cut, &two[..two.len() - 100]).unwrap();
        for inflate in [Inflate::Inline, Inflate::Pipelined] {
            assert_eq!(read_all(good.to_str().unwrap(), inflate).unwrap(), text);
            assert_eq!(read_all(plain.to_str().unwrap(), inflate).unwrap(), text);
            let err = read_all(cut.to_str().unwrap(), inflate).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("cut.csv.gz"), "{inflate:?}: {msg}");
            assert!(msg.contains("truncated gzip stream"), "{inflate:?}: {msg}");
        }
    }
}
