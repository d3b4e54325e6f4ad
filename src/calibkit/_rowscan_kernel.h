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

/* lanes of a where mask m is set, else lanes of b */
#define SELECT(m, a, b) ((VF)(((VI)(a) & (m)) | ((VI)(b) & ~(m))))
#if W == 16
#define LOW(v) __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7), VD)
#define HIGH(v) \
    __builtin_convertvector(__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15), VD)
#elif W == 8
#define LOW(v) __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), VD)
#define HIGH(v) __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), VD)
#else
#error "W must be 8 or 16"
#endif

/* exp(d) for d <= 0, lane by lane; 0 where `under` (d < -87, and d = -inf) */
static inline __attribute__((always_inline, target(TARGET))) VF EXP(VF d, VI under) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f; /* ln2 = hi + lo */
    const float round = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    VF dc = SELECT(under, (VF){0} - 87.0f, d);
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

static __attribute__((target(TARGET))) void NAME(const float *z, Py_ssize_t n, Py_ssize_t k,
                                                 double *top, double *s, double *sq,
                                                 double *ed) {
    for (Py_ssize_t i = 0; i < n; i++) {
        const float *row = z + i * k;
        Py_ssize_t body = k - k % W;
        VF tail = (VF){0} - INFINITY;
        memcpy(&tail, row + body, (size_t)(k - body) * sizeof(float));
        VF mv = tail;
        for (Py_ssize_t j = 0; j < body; j += W) {
            VF x;
            memcpy(&x, row + j, sizeof x);
            mv = SELECT(x > mv, x, mv);
        }
        float m = mv[0];
        for (int l = 1; l < W; l++)
            m = mv[l] > m ? mv[l] : m;
        VD s0 = {0}, s1 = {0}, q0 = {0}, q1 = {0}, d0 = {0}, d1 = {0};
        for (Py_ssize_t j = 0; j <= body; j += W) {
            VF x = tail;
            if (j < body)
                memcpy(&x, row + j, sizeof x);
            VF d = x - m;
            VI under = d < -87.0f;
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
        VD st = s0 + s1, qt = q0 + q1, dt = d0 + d1;
        double acc_s = 0, acc_q = 0, acc_d = 0;
        for (int l = 0; l < W / 2; l++) {
            acc_s += st[l];
            acc_q += qt[l];
            acc_d += dt[l];
        }
        top[i] = m;
        s[i] = acc_s;
        if (sq) {
            sq[i] = acc_q;
            ed[i] = acc_d;
        }
    }
}

#undef VF
#undef VI
#undef VD
#undef EXP
#undef SELECT
#undef LOW
#undef HIGH
