/* INCRBYFLOAT's arithmetic exactly as Redis 7.0 does it: `long double` (x87 80-bit on
 * x86-64), parsed by `string2ld` and printed by `ld2string(..., LD_STR_HUMAN)` of Redis's
 * `util.c`, with the same C library calls (strtold, snprintf "%.17Lf"). Rust has no
 * `long double`; this file is the whole of tamer's C. */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LONG_DOUBLE_CHARS (5 * 1024)

/* Redis's string2ld: 1 when `s` is a valid long double. */
static int string2ld(const char *s, size_t slen, long double *dp) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    long double value;
    char *eptr;

    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';

    errno = 0;
    value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || eptr[0] != '\0' || (size_t)(eptr - buf) != slen ||
        (errno == ERANGE && (value == HUGE_VALL || value == -HUGE_VALL || value == 0)) ||
        errno == EINVAL || isnan(value))
        return 0;

    if (dp) *dp = value;
    return 1;
}

/* Redis's ld2string in LD_STR_HUMAN mode: the length written, 0 when it does not fit. */
static size_t ld2string_human(char *buf, size_t len, long double value) {
    int l = snprintf(buf, len, "%.17Lf", value);
    if (l < 0 || (size_t)l + 1 > len) return 0;
    if (strchr(buf, '.') != NULL) {
        char *p = buf + l - 1;
        while (*p == '0') {
            p--;
            l--;
        }
        if (*p == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        l = 1;
    }
    return (size_t)l;
}

/* `current` (absent when `current` is NULL: 0) plus `incr`, printed into `out` (at least
 * MAX_LONG_DOUBLE_CHARS bytes), its length in `*out_len`. Returns 0 on success, 1 when
 * `current` or `incr` is no valid float, 2 when the sum is NaN or infinite. */
int tamer_incrbyfloat(const char *current, size_t current_len, const char *incr,
                      size_t incr_len, char *out, size_t *out_len) {
    long double value = 0, by;
    if (current != NULL && !string2ld(current, current_len, &value)) return 1;
    if (!string2ld(incr, incr_len, &by)) return 1;
    value += by;
    if (isnan(value) || isinf(value)) return 2;
    *out_len = ld2string_human(out, MAX_LONG_DOUBLE_CHARS, value);
    return 0;
}
