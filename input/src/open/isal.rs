//! Gzip inflated by Intel's ISA-L (`libisal.so.2`, Debian's `libisal2`), loaded at run
//! time: where the library is installed, a part of the c20u corpus inflates in half
//! zlib-rs's CPU (as fast as `igzip -dc`); where it is not, or `COVMERGE_INFLATE=zlib-rs`
//! asks for it, the caller keeps flate2's decoder. Loaded rather than linked, so that
//! a machine without the library (or `nasm` to build it) builds and runs covmerge the
//! same, and one with it needs no build option: which decoder ran is logged at info.
//!
//! The decoder behaves as flate2's `MultiGzDecoder` does, error for error: the gzip
//! header is parsed here by the same rules and with the same messages, ISA-L inflates
//! the member's deflate data and checks its trailer (CRC-32 and length), and another
//! member follows while input remains. An input that ends inside a member is an
//! `UnexpectedEof`, bad data an `InvalidInput` with flate2's words (the tests compare
//! the two decoders on cut and corrupted streams).

use std::ffi::{c_int, c_void};
use std::io::{self, BufRead, ErrorKind, Read};
use std::sync::OnceLock;

/// `sizeof(struct inflate_state)` of ISA-L 2.30 is 87,368 bytes; the state is
/// allocated larger, so a later release with bigger tables still fits (the self-test
/// of [`lib`] checks the fields used here).
const STATE_WORDS: usize = 2 * 87_368 / 8;

/// Offsets in `struct inflate_state` (ISA-L 2.x, x86-64) of the fields read or set
/// beyond the stream pointers at its start.
const BLOCK_STATE: usize = 21_160;
const CRC_FLAG: usize = 21_172;

/// `ISAL_BLOCK_FINISH`: the member's data and trailer are done.
const BLOCK_FINISH: u32 = 5;
/// `ISAL_GZIP_NO_HDR_VER`: raw deflate data followed by a gzip trailer to verify.
const GZIP_NO_HDR_VER: u32 = 6;
/// `ISAL_INCORRECT_CHECKSUM`.
const INCORRECT_CHECKSUM: c_int = -6;

/// The head of `struct inflate_state`, whose layout every ISA-L 2.x shares.
#[repr(C)]
struct Head {
    next_out: *mut u8,
    avail_out: u32,
    total_out: u32,
    next_in: *const u8,
    read_in: u64,
    avail_in: u32,
}

type Init = unsafe extern "C" fn(*mut c_void);
type Inflate = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The library's entry points.
struct Lib {
    init: Init,
    reset: Init,
    inflate: Inflate,
}

/// Which decoder inflates gzip inputs in this process: `"isa-l"` when `libisal.so.2`
/// is installed and passes its self-test (and `COVMERGE_INFLATE` does not say
/// `zlib-rs`), otherwise `"zlib-rs"`.
pub(crate) fn decoder_name() -> &'static str {
    if lib().is_some() {
        "isa-l"
    } else {
        "zlib-rs"
    }
}

/// What `COVMERGE_INFLATE` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Unset or empty: ISA-L where it loads, else zlib-rs.
    Auto,
    /// `zlib-rs`: flate2's decoder even where ISA-L is installed.
    ZlibRs,
    /// `isa-l`: ISA-L, and an input cannot be read where it does not load.
    IsaL,
}

/// The variable that chooses the decoder.
pub(crate) const INFLATE_VAR: &str = "COVMERGE_INFLATE";

/// `COVMERGE_INFLATE`'s value read: anything but unset, empty, `zlib-rs` or `isa-l`
/// is refused with a message that says what is accepted (a misspelt value used to
/// be ignored, so a benchmark thought to run one decoder ran the other).
pub(crate) fn choice(value: Option<&str>) -> Result<Choice, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(Choice::Auto),
        Some("zlib-rs") => Ok(Choice::ZlibRs),
        Some("isa-l") => Ok(Choice::IsaL),
        Some(other) => Err(format!(
            "{INFLATE_VAR}={other:?} is not a decoder: use zlib-rs or isa-l (or leave it unset: ISA-L where libisal.so.2 loads, else zlib-rs)"
        )),
    }
}

/// This process's [`choice`], read once; an unusable one is the error every gzip
/// input is refused with.
pub(crate) fn checked_choice() -> Result<Choice, &'static str> {
    static CHOICE: OnceLock<Result<Choice, String>> = OnceLock::new();
    let c = CHOICE.get_or_init(|| {
        let value = std::env::var_os(INFLATE_VAR).map(|v| v.to_string_lossy().into_owned());
        let c = choice(value.as_deref())?;
        if c == Choice::IsaL && lib().is_none() {
            return Err(format!(
                "{INFLATE_VAR}=isa-l, but ISA-L (libisal.so.2, Debian's libisal2) is not installed or failed its self-test"
            ));
        }
        Ok(c)
    });
    c.as_ref().copied().map_err(String::as_str)
}

/// ISA-L, once loaded and checked; `None` when absent, refused by its self-test, or
/// not asked for.
fn lib() -> Option<&'static Lib> {
    static LIB: OnceLock<Option<&'static Lib>> = OnceLock::new();
    LIB.get_or_init(|| {
        let value = std::env::var_os(INFLATE_VAR).map(|v| v.to_string_lossy().into_owned());
        if !matches!(choice(value.as_deref()), Ok(Choice::Auto | Choice::IsaL)) {
            return None;
        }
        let lib = load()?;
        let lib: &Lib = Box::leak(Box::new(lib));
        // A library whose state is laid out otherwise than assumed must not be used:
        // it inflates a known member (two of them, the second stored) exactly or not at all.
        let ok = matches!(
            inflate_all(lib, SELF_TEST),
            Ok(out) if out == b"covmerge covmerge covmerge covmerge\nok\n"
        );
        ok.then_some(lib)
    })
    .as_ref()
    .copied()
}

/// Two gzip members: "covmerge covmerge covmerge covmerge\n" compressed, then "ok\n" stored.
const SELF_TEST: &[u8] = &[
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x4b, 0xce, 0x2f, 0xcb, 0x4d, 0x2d,
    0x4a, 0x4f, 0x55, 0x48, 0xc6, 0xc9, 0xe0, 0x02, 0x00, 0x7a, 0x27, 0x5e, 0x8f, 0x24, 0x00, 0x00,
    0x00, 0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x03, 0x01, 0x03, 0x00, 0xfc, 0xff,
    0x6f, 0x6b, 0x0a, 0x7d, 0x0e, 0x16, 0xda, 0x03, 0x00, 0x00, 0x00,
];

fn inflate_all(lib: &'static Lib, gz: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    IsalGz::with(lib, gz).read_to_end(&mut out)?;
    Ok(out)
}

fn load() -> Option<Lib> {
    // SAFETY: dlopen and dlsym are called with NUL-terminated names; a symbol found is
    // one of ISA-L's documented functions, whose C signatures the types above repeat.
    unsafe {
        let h = libc::dlopen(c"libisal.so.2".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if h.is_null() {
            return None;
        }
        let sym = |name: &std::ffi::CStr| {
            let p = libc::dlsym(h, name.as_ptr());
            (!p.is_null()).then_some(p)
        };
        let init = sym(c"isal_inflate_init")?;
        let reset = sym(c"isal_inflate_reset")?;
        let inflate = sym(c"isal_inflate")?;
        Some(Lib {
            init: std::mem::transmute::<*mut c_void, Init>(init),
            reset: std::mem::transmute::<*mut c_void, Init>(reset),
            inflate: std::mem::transmute::<*mut c_void, Inflate>(inflate),
        })
    }
}

/// Where the decoder is in the stream of members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before a member's header (the first, or one after a finished member).
    Header,
    /// Inside a member's deflate data or trailer.
    Body,
    /// Every member read (or an error returned).
    Done,
}

/// A multi-member gzip stream read from `R`, inflated by ISA-L.
pub(super) struct IsalGz<R> {
    lib: &'static Lib,
    /// `struct inflate_state`, 8-byte aligned.
    state: Box<[u64]>,
    inner: R,
    phase: Phase,
    /// Members begun.
    members: u64,
}

impl<R: BufRead> IsalGz<R> {
    /// A decoder of `inner`, or `None` (with `inner` back) when ISA-L is not in use.
    pub(super) fn new(inner: R) -> Result<Self, R> {
        match lib() {
            Some(lib) => Ok(Self::with(lib, inner)),
            None => Err(inner),
        }
    }

    fn with(lib: &'static Lib, inner: R) -> Self {
        let mut state = vec![0u64; STATE_WORDS].into_boxed_slice();
        // SAFETY: the state is zeroed, aligned and larger than the library's struct.
        unsafe { (lib.init)(state.as_mut_ptr().cast()) };
        IsalGz {
            lib,
            state,
            inner,
            phase: Phase::Header,
            members: 0,
        }
    }

    /// The reader the compressed bytes come from.
    pub(super) fn get_ref(&self) -> &R {
        &self.inner
    }

    fn head(&mut self) -> &mut Head {
        // SAFETY: `Head` repeats the first fields of `struct inflate_state`, which
        // starts the 8-byte aligned state.
        unsafe { &mut *self.state.as_mut_ptr().cast::<Head>() }
    }

    fn field(&mut self, offset: usize) -> *mut u32 {
        debug_assert!(offset.is_multiple_of(4) && offset + 4 <= self.state.len() * 8);
        // SAFETY: in bounds and 4-byte aligned (checked above for the constants used).
        unsafe {
            self.state
                .as_mut_ptr()
                .cast::<u8>()
                .add(offset)
                .cast::<u32>()
        }
    }

    /// Starts a member whose header was just read.
    fn start_member(&mut self) {
        // SAFETY: the state was initialised by `isal_inflate_init`.
        unsafe {
            (self.lib.reset)(self.state.as_mut_ptr().cast());
            *self.field(CRC_FLAG) = GZIP_NO_HDR_VER;
        }
        self.phase = Phase::Body;
        self.members += 1;
    }

    /// Inflates into `buf` from the member's data: bytes written (0 once the member,
    /// trailer included, is done).
    fn body(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let input = self.inner.fill_buf()?;
            let (ptr, avail) = (input.as_ptr(), input.len().min(u32::MAX as usize) as u32);
            let out_len = buf.len().min(u32::MAX as usize) as u32;
            let h = self.head();
            h.next_in = ptr;
            h.avail_in = avail;
            h.next_out = buf.as_mut_ptr();
            h.avail_out = out_len;
            // SAFETY: next_in/avail_in describe the reader's buffered bytes and
            // next_out/avail_out `buf`, both live for the call.
            let ret = unsafe { (self.lib.inflate)(self.state.as_mut_ptr().cast()) };
            let h = self.head();
            let consumed = (avail - h.avail_in) as usize;
            let written = (out_len - h.avail_out) as usize;
            self.inner.consume(consumed);
            if ret == INCORRECT_CHECKSUM {
                self.phase = Phase::Done;
                return Err(io::Error::new(
                    ErrorKind::InvalidInput,
                    "corrupt gzip stream does not have a matching checksum",
                ));
            }
            if ret < 0 {
                self.phase = Phase::Done;
                return Err(io::Error::new(
                    ErrorKind::InvalidInput,
                    "corrupt deflate stream",
                ));
            }
            // SAFETY: a field of the state (see `field`).
            let finished = unsafe { *self.field(BLOCK_STATE) } == BLOCK_FINISH;
            if finished {
                self.phase = Phase::Header;
                if written > 0 {
                    return Ok(written);
                }
                return Ok(0);
            }
            if written > 0 {
                return Ok(written);
            }
            if avail == 0 {
                self.phase = Phase::Done;
                return Err(io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "incomplete deflate stream",
                ));
            }
        }
    }
}

impl<R: BufRead> Read for IsalGz<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.phase {
                Phase::Done => return Ok(0),
                Phase::Header => {
                    // After a member, the stream ends where the input does; the first
                    // member's header is read however short the input.
                    if self.members > 0 && self.inner.fill_buf()?.is_empty() {
                        self.phase = Phase::Done;
                        return Ok(0);
                    }
                    if let Err(e) = read_header(&mut self.inner) {
                        self.phase = Phase::Done;
                        return Err(e);
                    }
                    self.start_member();
                }
                Phase::Body => {
                    let n = self.body(buf)?;
                    if n > 0 {
                        return Ok(n);
                    }
                }
            }
        }
    }
}

/// The gzip header's flags (RFC 1952).
const FHCRC: u8 = 1 << 1;
const FEXTRA: u8 = 1 << 2;
const FNAME: u8 = 1 << 3;
const FCOMMENT: u8 = 1 << 4;
const FRESERVED: u8 = 0xe0;

/// The longest name or comment a header may hold (flate2's cap).
const MAX_HEADER_FIELD: usize = 65_535;

/// Reads `buf.len()` bytes; an input that ends first is an `UnexpectedEof`.
fn read_exact_eof(r: &mut impl Read, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match r.read(buf) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads up to a NUL byte (a name or comment), feeding the header's CRC.
fn read_to_nul(r: &mut impl BufRead, crc: &mut flate2::Crc) -> io::Result<()> {
    let mut len = 0usize;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        let (take, done) = match memchr::memchr(0, buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let text = take - usize::from(done);
        if len + text > MAX_HEADER_FIELD {
            // flate2 fails on the first byte past the cap, having read it.
            r.consume(MAX_HEADER_FIELD - len + 1);
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                "gzip header field too long",
            ));
        }
        crc.update(&buf[..take]);
        len += text;
        r.consume(take);
        if done {
            return Ok(());
        }
    }
}

/// Reads a member's header as flate2 does, with its errors.
fn read_header(r: &mut impl BufRead) -> io::Result<()> {
    let bad_header = || io::Error::new(ErrorKind::InvalidInput, "invalid gzip header");
    let mut fixed = [0u8; 10];
    read_exact_eof(r, &mut fixed)?;
    if fixed[0] != 0x1f || fixed[1] != 0x8b || fixed[2] != 8 {
        return Err(bad_header());
    }
    let flags = fixed[3];
    if flags & FRESERVED != 0 {
        return Err(bad_header());
    }
    let mut crc = flate2::Crc::new();
    crc.update(&fixed);
    if flags & FEXTRA != 0 {
        let mut xlen = [0u8; 2];
        read_exact_eof(r, &mut xlen)?;
        crc.update(&xlen);
        let mut extra = vec![0u8; u16::from_le_bytes(xlen) as usize];
        read_exact_eof(r, &mut extra)?;
        crc.update(&extra);
    }
    if flags & FNAME != 0 {
        read_to_nul(r, &mut crc)?;
    }
    if flags & FCOMMENT != 0 {
        read_to_nul(r, &mut crc)?;
    }
    if flags & FHCRC != 0 {
        let mut stored = [0u8; 2];
        read_exact_eof(r, &mut stored)?;
        if u16::from_le_bytes(stored) != crc.sum() as u16 {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                "corrupt gzip stream does not have a matching checksum",
            ));
        }
    }
    Ok(())
}
