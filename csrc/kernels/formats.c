/* The weight formats' names and sizes (formats.h, ha.h). */
#include "formats.h"

const char *ha_dtype_name(ha_dtype t) {
    switch (t) {
    case HA_F32: return "float32";
    case HA_BF16: return "bfloat16";
    case HA_F16: return "float16";
    case HA_Q8: return "int8";
    case HA_Q4: return "int4";
    case HA_F32P: return "float32 panels";
    case HA_BF16P: return "bfloat16 panels";
    case HA_F16P: return "float16 panels";
    case HA_Q8P: return "w8a8";
    case HA_BF16X: return "bfloat16 pairs";
    default: return "unknown";
    }
}

size_t ha_matrix_bytes(ha_dtype t, int64_t rows, int64_t cols) {
    /* cols <= INT64_MAX / 4 keeps ha_row_bytes from overflowing; the product is checked (it wrapped, so a (2^44,
     * 2^20) float32 matrix counted 0 bytes and ha_pack took it) */
    if ((unsigned)t >= HA_NDTYPES || rows < 0 || cols < 0 || cols > INT64_MAX / 4) return 0;
    if (ha_dtype_is_panels(t)) {
        if (rows > INT64_MAX - HA_PANEL_ROWS) return 0;
        rows = (rows + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS * HA_PANEL_ROWS;
    }
    size_t bytes;
    return __builtin_mul_overflow((size_t)rows, ha_row_bytes(t, cols), &bytes) ? 0 : bytes;
}
