//! The parameter structs kiln's Rust kernels take by value, shared by the host
//! (`kiln-runtime`, compiled for x86_64) and the device crate (`kernels/rust`, compiled for
//! `nvptx64-nvidia-cuda`) — no bindgen: both sides compile these very definitions.
//!
//! Each struct also carries its [`Layout`] (size, alignment, every field's offset and size) as
//! a constant. kiln-build reads the host's [`ALL`] and turns it into compile-time assertions
//! the device crate must pass (`KILN_HOST_LAYOUT`), so a device struct that differs from the
//! host's fails the kernel build naming the field. kiln-runtime asserts the same structs
//! against the C ABI (`kernels/include/kiln_abi.h`) its C++ twins take.
#![no_std]
#![warn(missing_docs)]

/// One field of a parameter struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLayout {
    /// The field's name.
    pub name: &'static str,
    /// Its offset in bytes.
    pub offset: usize,
    /// Its size in bytes.
    pub size: usize,
}

/// A parameter struct's layout on the target this crate was compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The struct's name.
    pub name: &'static str,
    /// `size_of`.
    pub size: usize,
    /// `align_of`.
    pub align: usize,
    /// Every field, in declaration order.
    pub fields: &'static [FieldLayout],
}

/// Declares a `#[repr(C)]` parameter struct and its `LAYOUT` from one field list.
macro_rules! params {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $name { $($(#[$fmeta])* pub $field: $ty,)* }

        impl $name {
            /// This struct's layout on the target compiled for.
            pub const LAYOUT: Layout = Layout {
                name: stringify!($name),
                size: core::mem::size_of::<$name>(),
                align: core::mem::align_of::<$name>(),
                fields: &[$(FieldLayout {
                    name: stringify!($field),
                    offset: core::mem::offset_of!($name, $field),
                    size: core::mem::size_of::<$ty>(),
                },)*],
            };
        }
    };
}

params! {
    /// `out[i] = a[i] + b[i]` for `i < n`.
    pub struct VecaddParams {
        /// Elements.
        pub n: u64,
    }
}

params! {
    /// `out[i] = gate[i] / (1 + exp(-gate[i])) * up[i]` for `i < n` (C twin: `KilnSiluMulParams`).
    pub struct SiluMulParams {
        /// Elements.
        pub n: u64,
    }
}

params! {
    /// `out[r, c] = x[r, c] * rsqrt(mean_c(x[r, :]^2) + eps) * weight[c]`; x, out: `[rows, cols]`
    /// (C twin: `KilnRmsnormParams`).
    pub struct RmsnormParams {
        /// Rows of x and out.
        pub rows: u64,
        /// Columns of x and out (the length of weight).
        pub cols: u64,
        /// Added to the mean square before the reciprocal square root.
        pub eps: f32,
    }
}

params! {
    /// `out[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max))`; x, out: `[rows, cols]`
    /// (C twin: `KilnSoftmaxParams`).
    pub struct SoftmaxParams {
        /// Rows of x and out.
        pub rows: u64,
        /// Columns of x and out (the softmax runs along them).
        pub cols: u64,
    }
}

/// Every parameter struct, in the order the device-side assertions are generated.
pub const ALL: &[Layout] = &[
    VecaddParams::LAYOUT,
    SiluMulParams::LAYOUT,
    RmsnormParams::LAYOUT,
    SoftmaxParams::LAYOUT,
];

/// The byte size of the field `p` points into (used by the generated device-side assertions:
/// `offset_of!` gives the offset, this the size).
pub const fn field_size<F>(_: *const F) -> usize {
    core::mem::size_of::<F>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_c_layouts() {
        assert_eq!(RmsnormParams::LAYOUT.size, 24);
        assert_eq!(RmsnormParams::LAYOUT.align, 8);
        let offsets: [usize; 3] = core::array::from_fn(|i| RmsnormParams::LAYOUT.fields[i].offset);
        assert_eq!(offsets, [0, 8, 16]);
        assert_eq!(RmsnormParams::LAYOUT.fields[2].name, "eps");
        assert_eq!(RmsnormParams::LAYOUT.fields[2].size, 4);
        assert_eq!(ALL.len(), 4);
        assert_eq!(SoftmaxParams::LAYOUT.size, 16);
    }
}
