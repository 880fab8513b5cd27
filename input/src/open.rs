use std::io::{self, BufReader, Read};

use bytes::Bytes;
use flate2::read::MultiGzDecoder;

use super::InputError;

mod isal;

pub(crate) use isal::decoder_name;

/// Bytes handed from a producer thread or task, read as a `Read` on a task thread.
/// The channel is tokio's: an async producer sends without holding a blocking-pool
/// thread (see covmerge-worker's `thread`), a producer thread uses `blocking_send`.
pub struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<io::Result<Bytes>>,
    cur: Bytes,
}

impl ChannelReader {
    /// A reader of the bytes received on `rx` until it closes; an `Err` received is returned by `read`.
    pub fn new(rx: tokio::sync::mpsc::Receiver<io::Result<Bytes>>) -> Self {
        ChannelReader {
            rx,
            cur: Bytes::new(),
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(b)) => self.cur = b,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len());
        buf[..n].copy_from_slice(&self.cur[..n]);
        let _ = self.cur.split_to(n);
        Ok(n)
    }
}

const CHUNK: usize = 1 << 20;

/// A `BufRead` that counts the bytes its reader consumed: the offset of a decode
/// error in the (compressed) input.
struct Counting<R> {
    inner: R,
    consumed: u64,
}

impl<R: Read> Read for Counting<BufReader<R>> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl<R: Read> io::BufRead for Counting<BufReader<R>> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.consumed += amt as u64;
        self.inner.consume(amt)
    }
}

/// Why reading an input's bytes failed, and where: carried inside the `io::Error` so
/// that the reader's user can name the input once ([`InputError::Decode`]).
#[derive(Debug, thiserror::Error)]
#[error("{problem}")]
pub(crate) struct DecodeFailure {
    /// Bytes of the raw (compressed, if gzip) input consumed before the failure.
    pub offset: u64,
    pub gzip: bool,
    pub problem: String,
}

enum Src<R: Read> {
    /// Over a 32 KiB buffer, as flate2's `read::MultiGzDecoder` reads: the offset of
    /// an error is counted in the same steps whichever decoder found it.
    Isal(Box<isal::IsalGz<BufReader<Counting<BufReader<R>>>>>),
    Gzip(Box<MultiGzDecoder<Counting<BufReader<R>>>>),
    Plain(Counting<BufReader<R>>),
}

/// A decompressed stream whose errors carry the byte offset where they happened
/// (and say "truncated gzip stream" when a gzip member ends early).
struct Decoded {
    src: Src<Box<dyn Read + Send>>,
}

impl Decoded {
    fn new<R: Read + Send + 'static>(raw: R) -> io::Result<Self> {
        Self::with_isal(raw, true)
    }

    /// [`Decoded::new`], with ISA-L only if `isal` (and loaded).
    fn with_isal<R: Read + Send + 'static>(raw: R, isal: bool) -> io::Result<Self> {
        let raw: Box<dyn Read + Send> = Box::new(raw);
        let mut raw = BufReader::with_capacity(CHUNK, raw);
        let gzip = peek_gzip(&mut raw)?;
        if gzip {
            isal::checked_choice()
                .map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))?;
        }
        let raw = Counting {
            inner: raw,
            consumed: 0,
        };
        let src = if gzip {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::info!(
                    decoder = decoder_name(),
                    "gzip inputs inflate with {}",
                    decoder_name()
                )
            });
            let isal_gz = if isal {
                isal::IsalGz::new(BufReader::with_capacity(32 * 1024, raw))
                    .map_err(BufReader::into_inner)
            } else {
                Err(raw)
            };
            match isal_gz {
                Ok(d) => Src::Isal(Box::new(d)),
                Err(raw) => Src::Gzip(Box::new(MultiGzDecoder::new(raw))),
            }
        } else {
            Src::Plain(raw)
        };
        Ok(Decoded { src })
    }
}

impl Read for Decoded {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (r, offset, gzip) = match &mut self.src {
            Src::Isal(d) => {
                let r = d.read(buf);
                (r, d.get_ref().get_ref().consumed, true)
            }
            Src::Gzip(d) => {
                let r = d.read(buf);
                (r, d.get_ref().consumed, true)
            }
            Src::Plain(p) => {
                let r = p.read(buf);
                (r, p.consumed, false)
            }
        };
        r.map_err(|e| {
            if e.kind() == io::ErrorKind::Interrupted {
                return e;
            }
            let problem = if gzip && e.kind() == io::ErrorKind::UnexpectedEof {
                "truncated gzip stream (it ends inside a member, or bytes after the last member are not a gzip member)".to_string()
            } else if gzip && e.kind() == io::ErrorKind::InvalidInput {
                format!("corrupt gzip data ({e})")
            } else {
                e.to_string()
            };
            io::Error::new(
                e.kind(),
                DecodeFailure {
                    offset,
                    gzip,
                    problem,
                },
            )
        })
    }
}

/// Decompresses (if gzip) on a separate thread so that inflating and parsing overlap:
/// with one input the parse thread is never waiting on `read` for long.
fn pipelined<R: Read + Send + 'static>(raw: R) -> ChannelReader {
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(8);
    std::thread::Builder::new()
        .name("inflate".into())
        .spawn(move || {
            let mut src = match Decoded::new(raw) {
                Ok(d) => d,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
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
                            let _ = tx.blocking_send(Err(e));
                            return;
                        }
                    }
                }
                if filled == 0 {
                    return;
                }
                buf.truncate(filled);
                if tx.blocking_send(Ok(Bytes::from(buf))).is_err() {
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
            Inflate::Pipelined => Box::new(pipelined(raw)),
            Inflate::Inline => Box::new(Decoded::new(raw).map_err(|e| InputError::Open {
                input: spec.to_string(),
                source: e,
            })?),
        })
    };
    decode(open_raw(spec, rt)?)
}

/// Opens an input (a local path or an object-store URL) as its bytes as stored, not
/// decompressed (`report --manifest` hashes a result's parts). Store objects are
/// streamed by a task on `rt`, never fully buffered.
pub fn open_raw(
    spec: &str,
    rt: &tokio::runtime::Handle,
) -> Result<Box<dyn Read + Send>, InputError> {
    if covmerge_storage::is_store_url(spec) {
        let (store, key) = covmerge_storage::open_object(spec).map_err(|e| InputError::Open {
            input: spec.to_string(),
            source: io::Error::other(e),
        })?;
        // An async sender and a blocking receiver: the streaming task never holds a
        // blocking-pool thread while the reader is busy (see covmerge-worker's thread module).
        let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(8);
        rt.spawn(async move {
            use futures::StreamExt;
            let mut stream = match store.get_stream(&key).await {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send(Err(io::Error::other(e))).await;
                    return;
                }
            };
            while let Some(item) = stream.next().await {
                let item = item.map_err(io::Error::other);
                let stop = item.is_err();
                if tx.send(item).await.is_err() || stop {
                    return;
                }
            }
        });
        Ok(Box::new(ChannelReader::new(rx)))
    } else {
        let f = std::fs::File::open(spec).map_err(|e| InputError::Open {
            input: spec.to_string(),
            source: e,
        })?;
        Ok(Box::new(f))
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
            assert!(msg.contains("truncated gzip stream"), "{inflate:?}: {msg}");
            let at = err
                .get_ref()
                .and_then(|e| e.downcast_ref::<DecodeFailure>())
                .expect("a decode failure with its offset");
            assert_eq!(at.offset, two.len() as u64 - 100, "{inflate:?}");
            assert!(at.gzip);
        }
    }

    /// What a decoder made of a stream: its bytes, or its error's kind, words and offset.
    fn outcome(gz: &[u8], isal: bool) -> Result<Vec<u8>, (io::ErrorKind, String, u64)> {
        let mut d = Decoded::with_isal(std::io::Cursor::new(gz.to_vec()), isal).unwrap();
        if isal {
            assert!(matches!(d.src, Src::Isal(_)), "ISA-L not in use");
        }
        let mut out = Vec::new();
        let mut buf = vec![0u8; 4096];
        loop {
            match d.read(&mut buf) {
                Ok(0) => return Ok(out),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => {
                    let at = e
                        .get_ref()
                        .and_then(|e| e.downcast_ref::<DecodeFailure>())
                        .expect("a decode failure");
                    return Err((e.kind(), at.problem.clone(), at.offset));
                }
            }
        }
    }

    /// A gzip member with every optional header field (FEXTRA, FNAME, FCOMMENT, FHCRC).
    fn gz_with_header_fields(data: &[u8]) -> Vec<u8> {
        let plain = gz(data);
        let mut head = vec![0x1f, 0x8b, 8, 0x1e, 0, 0, 0, 0, 0, 0xff];
        head.extend([3, 0, b'x', b'y', b'z']);
        head.extend(b"name.csv\0");
        head.extend(b"a comment\0");
        let mut crc = flate2::Crc::new();
        crc.update(&head);
        head.extend((crc.sum() as u16).to_le_bytes());
        head.extend(&plain[10..]);
        head
    }

    #[test]
    fn unknown_covmerge_inflate_is_refused_not_ignored() {
        use isal::{choice, Choice};
        assert_eq!(choice(None), Ok(Choice::Auto));
        assert_eq!(choice(Some("")), Ok(Choice::Auto));
        assert_eq!(choice(Some("zlib-rs")), Ok(Choice::ZlibRs));
        assert_eq!(choice(Some(" isa-l ")), Ok(Choice::IsaL));
        for bad in ["zlib", "isal", "ISA-L", "igzip", "zlib-rs,isa-l"] {
            let why = choice(Some(bad)).unwrap_err();
            assert!(
                why.contains(&format!("COVMERGE_INFLATE={bad:?}"))
                    && why.contains("zlib-rs")
                    && why.contains("isa-l"),
                "{bad}: {why}"
            );
        }
    }

    #[test]
    fn isal_decodes_and_fails_as_flate2_does() {
        assert_eq!(
            isal::decoder_name(),
            "isa-l",
            "ISA-L (libisal.so.2, Debian's libisal2) must be installed for this test"
        );
        let text: Vec<u8> = (0..30_000)
            .flat_map(|i| {
                format!("r,c{},a/b{}.c,f{},m,{i},1\n", i / 5000, i % 40, i % 300).into_bytes()
            })
            .collect();
        let mut two = gz(&text[..text.len() / 3]);
        two.extend(gz_with_header_fields(&text[text.len() / 3..]));
        let mut streams: Vec<(String, Vec<u8>)> = vec![
            ("whole".into(), two.clone()),
            ("empty member".into(), gz(b"")),
            ("header fields".into(), gz_with_header_fields(b"abc\n")),
        ];
        // Cut everywhere near the members' edges, and at a stride through the data.
        let first = gz(&text[..text.len() / 3]).len();
        let cuts = (2..40)
            .chain(first - 20..first + 60)
            .chain((2..two.len()).step_by(997))
            .chain(two.len() - 20..two.len());
        for cut in cuts {
            streams.push((format!("cut at {cut}"), two[..cut].to_vec()));
        }
        // Corrupt a byte at a stride (data, trailers, the second header).
        for at in (2..two.len()).step_by(1_301).chain(first - 8..first + 40) {
            let mut bad = two.clone();
            bad[at] ^= 0x5a;
            streams.push((format!("byte {at} flipped"), bad));
        }
        for tail in [
            &b"\0"[..],
            b"\0\0\0\0\0\0\0\0\0\0\0\0",
            b"garbage after the member",
            b"\x1f\x8b\x09",
        ] {
            let mut t = two.clone();
            t.extend_from_slice(tail);
            streams.push((format!("trailing {tail:?}"), t));
        }
        let mut long_name = vec![0x1f, 0x8b, 8, 0x08, 0, 0, 0, 0, 0, 0xff];
        long_name.extend(std::iter::repeat_n(b'n', 70_000));
        streams.push(("name past the cap".into(), long_name));
        let mut reserved = gz(b"x");
        reserved[3] = 0x80;
        streams.push(("reserved flag".into(), reserved));
        let mut hcrc = gz_with_header_fields(b"abc");
        hcrc[34] ^= 1;
        streams.push(("header crc".into(), hcrc));
        for (what, s) in &streams {
            let (zlib, isal) = (outcome(s, false), outcome(s, true));
            match (&zlib, &isal) {
                (Ok(a), Ok(b)) => assert!(a == b, "{what}: bytes differ"),
                (Err(a), Err(b)) => assert_eq!(a, b, "{what}"),
                _ => panic!(
                    "{what}: zlib-rs {:?} but ISA-L {:?}",
                    zlib.map(|v| v.len()),
                    isal.map(|v| v.len())
                ),
            }
        }
        assert_eq!(outcome(&two, true).unwrap(), text);
    }
}
