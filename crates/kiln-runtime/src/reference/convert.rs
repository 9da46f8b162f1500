//! Host bytes <-> f32 for every float dtype (and i32/i64 ids <-> i64).

use half::{bf16, f16};

use crate::dtype::DType;
use crate::error::{Error, Result};

/// Decodes native-endian elements of `dtype` to f32 (ints are converted exactly up to 2^24).
pub fn to_f32(bytes: &[u8], dtype: DType) -> Result<Vec<f32>> {
    if !bytes.len().is_multiple_of(dtype.size()) {
        return Err(Error::Shape(format!(
            "{} bytes is not a whole number of {dtype} elements",
            bytes.len()
        )));
    }
    let chunks = bytes.chunks_exact(dtype.size());
    Ok(match dtype {
        DType::F32 => chunks
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect(),
        DType::F16 => chunks
            .map(|c| f16::from_ne_bytes(c.try_into().unwrap()).to_f32())
            .collect(),
        DType::BF16 => chunks
            .map(|c| bf16::from_ne_bytes(c.try_into().unwrap()).to_f32())
            .collect(),
        DType::I32 => chunks
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()) as f32)
            .collect(),
        DType::I64 => chunks
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap()) as f32)
            .collect(),
    })
}

/// Encodes f32 values as native-endian `dtype` elements (round to nearest even).
pub fn from_f32(values: &[f32], dtype: DType) -> Result<Vec<u8>> {
    Ok(match dtype {
        DType::F32 => values.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        DType::F16 => values
            .iter()
            .flat_map(|v| f16::from_f32(*v).to_ne_bytes())
            .collect(),
        DType::BF16 => values
            .iter()
            .flat_map(|v| bf16::from_f32(*v).to_ne_bytes())
            .collect(),
        other => {
            return Err(Error::DType(format!(
                "from_f32: {other} is not a float type"
            )))
        }
    })
}

/// `v` rounded to the nearest value representable in `dtype` (identity for f32).
pub fn round_to(v: f32, dtype: DType) -> f32 {
    match dtype {
        DType::F16 => f16::from_f32(v).to_f32(),
        DType::BF16 => bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// Encodes ids as native-endian i32 or i64.
pub fn ids_to_bytes(ids: &[i64], dtype: DType) -> Result<Vec<u8>> {
    Ok(match dtype {
        DType::I32 => ids.iter().flat_map(|&v| (v as i32).to_ne_bytes()).collect(),
        DType::I64 => ids.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        other => return Err(Error::DType(format!("ids must be i32 or i64, not {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rounding() {
        let v = [1.0f32, -2.5, 0.1, 65504.0];
        for dt in DType::FLOATS {
            let back = to_f32(&from_f32(&v, dt).unwrap(), dt).unwrap();
            for (a, b) in v.iter().zip(&back) {
                assert_eq!(*b, round_to(*a, dt), "{dt}");
            }
        }
        // 1 + 2^-9 is halfway between two bf16 values: ties go to even (1.0).
        assert_eq!(round_to(1.0 + 1.0 / 512.0, DType::BF16), 1.0);
        assert_eq!(round_to(1.0 + 3.0 / 512.0, DType::BF16), 1.0 + 4.0 / 512.0);
        assert_eq!(round_to(0.1, DType::F16), 0.099975586);
        assert!(to_f32(&[0u8; 3], DType::F16).is_err());
        assert!(from_f32(&[1.0], DType::I32).is_err());
        assert_eq!(
            to_f32(&ids_to_bytes(&[7, -1], DType::I32).unwrap(), DType::I32).unwrap(),
            vec![7.0, -1.0]
        );
    }
}
