//! The strict reader of a merge result, [`covmerge_input::result`] (moved there so that
//! the coordinator's publish gate reads a result as `report` and `diff` do).

pub use covmerge_input::result::*;

/// Whether an error is [`ReadError::NotContiguous`] (read the result grouped instead).
pub fn is_not_contiguous(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<ReadError>(),
        Some(ReadError::NotContiguous { .. })
    )
}
