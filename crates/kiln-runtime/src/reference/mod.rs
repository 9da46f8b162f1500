//! CPU references (filled in below).
