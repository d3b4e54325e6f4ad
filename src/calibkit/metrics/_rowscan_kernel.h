/* The row scan for one vector width, included by _rowscan.c once per instruction set with
 * W (floats per vector), TARGET (the function's target attribute) and NAME (the function)
 * defined. Written with GCC's vector extensions (also understood by clang); W matches the
 * instruction set's register width, so that comparisons compile to vector instructions.
 */
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VF CAT(vf, W)
#define VI CAT(vi, W)
#define VD CAT(vd, W)
#define EXP CAT(exp_nonpositive, W)

typedef float VF __attribute__((vector_size(W * sizeof(float))));
typedef int32_t VI __attribute__((vector_size(W * sizeof(int32_t))));
typedef double VD __attribute__((vector_size(W / 2 * sizeof(double))));

/* padding lanes: below every finite logit's row maximum, so exp(PAD - max) = 0, and finite,
 * so that a -inf among the values stands out in their minimum */
#define PAD ((VF){0} - FLT_MAX)

/* lanes of a where mask m is set, else lanes of b */
#define SELECT(m, a, b) ((VF)(((VI)(a) & (m)) | ((VI)(b) & ~(m))))
#if W == 16
/* the low and high halves of v in float64; the larger of a and b lane by lane (b where a
 * lane is NaN, a where b's is); GCC's vector extensions spell each in several instructions */
#define LOW(v) ((VD)_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)(v))))
#define HIGH(v) ((VD)_mm512_cvtps_pd((__m256)_mm512_extractf64x4_pd((__m512d)(v), 1)))
#define MAX(a, b) ((VF)_mm512_max_ps((__m512)(a), (__m512)(b)))
#define MIN(a, b) ((VF)_mm512_min_ps((__m512)(a), (__m512)(b)))
#define LANES ((VI){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
/* v with its lanes moved by h (a power of two below W), for reductions in log2(W) steps */
#define SWAP8(v) __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)
#define SWAP4(v) __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11)
#define SWAP2(v) __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)
#define SWAP1(v) __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)
#define DSWAP4(v) __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3)
#define DSWAP2(v) __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5)
#define DSWAP1(v) __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6)
#define HMAX(v) (v = MAX(v, SWAP8(v)), v = MAX(v, SWAP4(v)), v = MAX(v, SWAP2(v)), MAX(v, SWAP1(v))[0])
#define HSUM(v) (v += DSWAP4(v), v += DSWAP2(v), v += DSWAP1(v), v[0])
/* the first `count` (< W) floats at p, PAD in the other lanes, which are not read */
#define LOAD_FIRST(p, count) \
    ((VF)_mm512_mask_loadu_ps((__m512)PAD, (__mmask16)((1u << (count)) - 1), p))
#elif W == 8
#define LOW(v) ((VD)_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)(v))))
#define HIGH(v) ((VD)_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)(v), 1)))
#define MAX(a, b) ((VF)_mm256_max_ps((__m256)(a), (__m256)(b)))
#define MIN(a, b) ((VF)_mm256_min_ps((__m256)(a), (__m256)(b)))
#define LANES ((VI){0, 1, 2, 3, 4, 5, 6, 7})
#define SWAP4(v) __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3)
#define SWAP2(v) __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5)
#define SWAP1(v) __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6)
#define DSWAP2(v) __builtin_shufflevector(v, v, 2, 3, 0, 1)
#define DSWAP1(v) __builtin_shufflevector(v, v, 1, 0, 3, 2)
#define HMAX(v) (v = MAX(v, SWAP4(v)), v = MAX(v, SWAP2(v)), MAX(v, SWAP1(v))[0])
#define HSUM(v) (v += DSWAP2(v), v += DSWAP1(v), v[0])
#define LOAD_FIRST(p, count) \
    SELECT(LANES < (count), (VF)_mm256_maskload_ps(p, (__m256i)(LANES < (count))), PAD)
#else
#error "W must be 8 or 16"
#endif

/* exp(d) for d <= 0, lane by lane; 0 where `under` (d < -87, and d = -inf) */
static inline __attribute__((always_inline, target(TARGET))) VF EXP(VF d, VI under) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f; /* ln2 = hi + lo */
    const float round = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    VF dc = MAX((VF){0} - 87.0f, d); /* NaN stays NaN */
    VF n = (dc * log2e + round) - round;
    VF r = dc - n * ln2_hi;
    r = r - n * ln2_lo;
    VF p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    VI two_n = (__builtin_convertvector(n, VI) + 127) << 23; /* 2^n as float bits */
    return SELECT(under, (VF){0}, p * (VF)two_n);
}

/* returns 1 where every value is finite, else 0 (the sums are then meaningless) */
static __attribute__((target(TARGET))) int NAME(const float *z, Py_ssize_t n, Py_ssize_t k,
                                                double *top, double *s, double *sq, double *ed) {
    const Py_ssize_t rem = k % W, body = k - rem;
    const int32_t last = (int32_t)rem;
    const VI beyond = LANES >= last; /* the tail's padding lanes: they contribute 0 */
    VF lo = (VF){0} + INFINITY; /* the least value (NaN ignored): -inf shows here */
    int finite = 1;             /* NaN and +inf show in s */
    for (Py_ssize_t i = 0; i < n; i++) {
        const float *row = z + i * k;
        VF tail = rem ? LOAD_FIRST(row + body, last) : PAD; /* the values after the body */
        VF mv = tail;
        lo = MIN(tail, lo);
        for (Py_ssize_t j = 0; j < body; j += W) {
            VF x;
            memcpy(&x, row + j, sizeof x);
            mv = MAX(x, mv);
            lo = MIN(x, lo);
        }
        const float m = HMAX(mv);
        VD s0 = {0}, s1 = {0}, q0 = {0}, q1 = {0}, d0 = {0}, d1 = {0};
        for (Py_ssize_t j = 0; j < body + (rem ? W : 0); j += W) {
            VF x = tail;
            if (j < body)
                memcpy(&x, row + j, sizeof x);
            VF d = x - m;
            VI under = d < -87.0f;
            if (j >= body)
                under |= beyond;
            VF e = EXP(d, under);
            s0 += LOW(e);
            s1 += HIGH(e);
            if (sq) {
                VF ee = e * e, de = SELECT(under, (VF){0}, e * d);
                q0 += LOW(ee);
                q1 += HIGH(ee);
                d0 += LOW(de);
                d1 += HIGH(de);
            }
        }
        top[i] = m;
        s0 += s1;
        s[i] = HSUM(s0);
        finite &= isfinite(s[i]) != 0;
        if (sq) {
            q0 += q1;
            d0 += d1;
            sq[i] = HSUM(q0);
            ed[i] = HSUM(d0);
        }
    }
    for (int l = 0; l < W; l++)
        finite &= lo[l] > -INFINITY;
    return finite;
}

#undef VF
#undef VI
#undef VD
#undef EXP
#undef SELECT
#undef MAX
#undef LOW
#undef HIGH
#undef LANES
#undef PAD
#undef MIN
#undef LOAD_FIRST
#undef SWAP8
#undef SWAP4
#undef SWAP2
#undef SWAP1
#undef DSWAP4
#undef DSWAP2
#undef DSWAP1
#undef HMAX
#undef HSUM
