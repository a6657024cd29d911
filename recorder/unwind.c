/*
 * unwind.c - the recorder's own stack walk: frame pointers where a frame keeps one, and the
 * module's call-frame information (.eh_frame) everywhere, each frame's rule read once per PC.
 *
 * A naive frame-pointer walk is wrong without a word of warning wherever a function does not
 * keep %rbp as its frame pointer (most of Debian: libc, libstdc++, Python, any -O2 program), so
 * this walk never assumes: for every return address it asks the module's own unwind table (the
 * one libunwind and the C++ runtime read, found with _dl_find_object, which takes no lock) how
 * that frame's caller is found at that PC:
 *   CFA = %rsp + k  or  %rbp + k   (a frame-pointer frame is the second one, k = 16),
 *   the return address at CFA - 8, %rbp saved at CFA + j or left as it is.
 * The rule is kept in a per-thread direct-mapped cache keyed by the PC, so a repeated stack costs
 * one cache probe, two or three loads and the checks per frame.  Each step is validated: the new
 * CFA lies above the previous one, inside the thread's stack, 8-aligned, and every word read is
 * inside the stack.  Anything the rule cannot say -- no unwind entry, a CFA kept in another
 * register or computed by an expression (PLT stubs, the signal trampoline), a register saved in
 * another register, a 64-bit or odd encoding -- returns -1 and the caller walks the stack with
 * libunwind instead, from the start.  Where it answers, it answers what libunwind's own fast
 * path (the same table, the same rules) answers: tests/unwind_test.sh compares the two.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) && defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)

/* DWARF register numbers on x86-64 */
enum { R_RBP = 6, R_RSP = 7, R_RA = 16 };

/* A register's rule while the CFA program runs: only %rbp's and the return address's matter */
enum { RULE_SAME, RULE_UNDEF, RULE_OFFSET, RULE_OTHER };

typedef struct cfa_state {
    int64_t cfa_off;
    int cfa_reg;
    int rbp_rule, ra_rule;
    int64_t rbp_off, ra_off;
} cfa_state;

typedef struct rd {
    const uint8_t *p, *end;
    int bad;
} rd;

static uint64_t u8_(rd *r)
{
    if (r->p + 1 > r->end) {
        r->bad = 1;
        return 0;
    }
    return *r->p++;
}

static uint64_t fixed(rd *r, int n)
{
    if (r->p + n > r->end) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, r->p, (size_t)n); /* little endian */
    r->p += n;
    return v;
}

static uint64_t uleb(rd *r)
{
    uint64_t v = 0;
    for (int sh = 0; sh < 64; sh += 7) {
        uint64_t b = u8_(r);
        if (r->bad) return 0;
        v |= (b & 0x7f) << sh;
        if (!(b & 0x80)) return v;
    }
    r->bad = 1;
    return 0;
}

static int64_t sleb(rd *r)
{
    uint64_t v = 0;
    int sh = 0;
    uint64_t b;
    do {
        b = u8_(r);
        if (r->bad) return 0;
        if (sh < 64) v |= (b & 0x7f) << sh;
        sh += 7;
    } while (b & 0x80);
    if (sh < 64 && (b & 0x40)) v |= ~0ull << sh;
    return (int64_t)v;
}

/* A DW_EH_PE-encoded pointer: absolute/pc-relative only (what GCC and LLVM emit in .eh_frame). */
static uintptr_t eh_ptr(rd *r, int enc)
{
    if (enc == 0xff) return 0; /* DW_EH_PE_omit */
    uintptr_t at = (uintptr_t)r->p, v;
    switch (enc & 0x0f) {
    case 0x00: v = (uintptr_t)fixed(r, 8); break;
    case 0x01: v = (uintptr_t)uleb(r); break;
    case 0x02: v = (uintptr_t)(uint16_t)fixed(r, 2); break;
    case 0x03: v = (uintptr_t)(uint32_t)fixed(r, 4); break;
    case 0x04: v = (uintptr_t)fixed(r, 8); break;
    case 0x09: v = (uintptr_t)sleb(r); break;
    case 0x0a: v = (uintptr_t)(int64_t)(int16_t)fixed(r, 2); break;
    case 0x0b: v = (uintptr_t)(int64_t)(int32_t)fixed(r, 4); break;
    case 0x0c: v = (uintptr_t)fixed(r, 8); break;
    default: r->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += at; break; /* pcrel */
    default: r->bad = 1; return 0;
    }
    if (enc & 0x80) r->bad = 1; /* indirect: never for code addresses */
    return v;
}

static void set_rule(cfa_state *s, uint64_t reg, int rule, int64_t off)
{
    if (reg == R_RBP) s->rbp_rule = rule, s->rbp_off = off;
    else if (reg == R_RA) s->ra_rule = rule, s->ra_off = off;
}

#define MAX_REMEMBER 8

/* Run a CFA program up to (and including the row of) target.  Returns 1 when target's row was
 * reached, 0 when the program ended first, -1 on anything not understood. */
static int run_cfa(rd *r, uintptr_t *loc, uintptr_t target, uint64_t code_align, int64_t data_align,
                   cfa_state *s, const cfa_state *init)
{
    cfa_state stack[MAX_REMEMBER];
    int depth = 0;
    while (r->p < r->end) {
        uint8_t op = (uint8_t)u8_(r);
        uint64_t reg, adv = 0;
        int advance = 0;
        switch (op >> 6) {
        case 1: adv = (op & 0x3f) * code_align; advance = 1; break;
        case 2: set_rule(s, op & 0x3f, RULE_OFFSET, (int64_t)uleb(r) * data_align); continue;
        case 3:
            reg = op & 0x3f;
            if (!init) return -1;
            if (reg == R_RBP) s->rbp_rule = init->rbp_rule, s->rbp_off = init->rbp_off;
            if (reg == R_RA) s->ra_rule = init->ra_rule, s->ra_off = init->ra_off;
            continue;
        default: break;
        }
        if (!advance) switch (op) {
            case 0x00: break;                                    /* nop */
            case 0x01: return -1; /* set_loc: not emitted by GCC or LLVM */
            case 0x02: adv = u8_(r) * code_align; advance = 1; break;
            case 0x03: adv = fixed(r, 2) * code_align; advance = 1; break;
            case 0x04: adv = fixed(r, 4) * code_align; advance = 1; break;
            case 0x05: reg = uleb(r); set_rule(s, reg, RULE_OFFSET, (int64_t)uleb(r) * data_align); break;
            case 0x06:
                reg = uleb(r);
                if (!init) return -1;
                if (reg == R_RBP) s->rbp_rule = init->rbp_rule, s->rbp_off = init->rbp_off;
                if (reg == R_RA) s->ra_rule = init->ra_rule, s->ra_off = init->ra_off;
                break;
            case 0x07: set_rule(s, uleb(r), RULE_UNDEF, 0); break;
            case 0x08: set_rule(s, uleb(r), RULE_SAME, 0); break;
            case 0x09: reg = uleb(r); (void)uleb(r); set_rule(s, reg, RULE_OTHER, 0); break;
            case 0x0a:
                if (depth == MAX_REMEMBER) return -1;
                stack[depth++] = *s;
                break;
            case 0x0b:
                if (!depth) return -1;
                *s = stack[--depth]; /* the whole row, the CFA rule with it */
                break;
            case 0x0c: s->cfa_reg = (int)uleb(r); s->cfa_off = (int64_t)uleb(r); break;
            case 0x0d: s->cfa_reg = (int)uleb(r); break;
            case 0x0e: s->cfa_off = (int64_t)uleb(r); break;
            case 0x0f: return -1; /* def_cfa_expression */
            case 0x10:
            case 0x16: /* expression, val_expression */
                reg = uleb(r);
                set_rule(s, reg, RULE_OTHER, 0);
                r->p += uleb(r);
                break;
            case 0x11: reg = uleb(r); set_rule(s, reg, RULE_OFFSET, sleb(r) * data_align); break;
            case 0x12: s->cfa_reg = (int)uleb(r); s->cfa_off = sleb(r) * data_align; break;
            case 0x13: s->cfa_off = sleb(r) * data_align; break;
            case 0x14: reg = uleb(r); (void)uleb(r); set_rule(s, reg, RULE_OTHER, 0); break;
            case 0x15: reg = uleb(r); (void)sleb(r); set_rule(s, reg, RULE_OTHER, 0); break;
            case 0x2e: (void)uleb(r); break; /* GNU_args_size: for landing pads, not for unwinding */
            case 0x2f: reg = uleb(r); set_rule(s, reg, RULE_OFFSET, -(int64_t)uleb(r) * data_align); break;
            default: return -1;
            }
        if (r->bad || r->p > r->end) return -1;
        if (advance) {
            if (*loc + adv > target) return 1;
            *loc += adv;
        }
    }
    return 0;
}

/* The rule of the frame whose return address (or, for the signal-free frames walked here, PC
 * just after the call) is pc: 0 and *out filled, or -1. */
int cmh_unwind_rule(uintptr_t pc, cmh_unw_rule *out)
{
    uintptr_t target = pc - 1; /* inside the call instruction: the row of the call */
    struct dl_find_object fo;
    if (_dl_find_object((void *)target, &fo) != 0 || !fo.dlfo_eh_frame) return -1;
    /* .eh_frame_hdr: version 1, then the encodings of the .eh_frame pointer, the count and the
     * sorted table; only the table every linker writes (datarel sdata4) is searched */
    const uint8_t *hdr = fo.dlfo_eh_frame;
    if (hdr[0] != 1 || hdr[3] != 0x3b) return -1;
    rd r = {hdr + 4, hdr + 4 + 16, 0};
    (void)eh_ptr(&r, hdr[1]);
    uintptr_t count;
    if (hdr[2] == 0x03) count = (uint32_t)fixed(&r, 4);
    else if (hdr[2] == 0x0b) count = (uintptr_t)(int64_t)(int32_t)fixed(&r, 4);
    else return -1;
    if (r.bad || !count) return -1;
    const int32_t *tab = (const int32_t *)(const void *)r.p;
    uintptr_t lo = 0, hi = count;
    if ((intptr_t)target < (intptr_t)((uintptr_t)hdr + (intptr_t)tab[0])) return -1;
    while (hi - lo > 1) {
        uintptr_t mid = (lo + hi) / 2;
        if ((uintptr_t)hdr + (intptr_t)tab[2 * mid] <= target) lo = mid;
        else hi = mid;
    }
    const uint8_t *fde = hdr + (intptr_t)tab[2 * lo + 1];

    /* the FDE and its CIE */
    uint32_t flen, clen;
    memcpy(&flen, fde, 4);
    if (flen == 0 || flen == 0xffffffffu) return -1;
    int32_t cie_ptr;
    memcpy(&cie_ptr, fde + 4, 4);
    const uint8_t *cie = fde + 4 - cie_ptr;
    memcpy(&clen, cie, 4);
    if (clen == 0 || clen == 0xffffffffu) return -1;
    rd c = {cie + 8, cie + 4 + clen, 0};
    int version = (int)u8_(&c);
    if (version != 1 && version != 3) return -1;
    const char *aug = (const char *)c.p;
    size_t auglen = strnlen(aug, (size_t)(c.end - c.p));
    c.p += auglen + 1;
    if (aug[0] && aug[0] != 'z') return -1;
    uint64_t code_align = uleb(&c);
    int64_t data_align = sleb(&c);
    uint64_t ra_reg = version == 1 ? u8_(&c) : uleb(&c);
    if (ra_reg != R_RA) return -1;
    int fde_enc = 0, has_z = aug[0] == 'z';
    if (has_z) {
        uint64_t alen = uleb(&c);
        const uint8_t *adata = c.p, *aend = c.p + alen;
        rd a = {adata, aend, 0};
        for (const char *k = aug + 1; *k; k++) {
            if (*k == 'R') fde_enc = (int)u8_(&a);
            else if (*k == 'L') (void)u8_(&a);
            else if (*k == 'P') {
                int penc = (int)u8_(&a);
                /* the personality pointer: skipped by its size */
                switch (penc & 0x0f) {
                case 0x00: case 0x04: case 0x0c: a.p += 8; break;
                case 0x03: case 0x0b: a.p += 4; break;
                case 0x02: case 0x0a: a.p += 2; break;
                case 0x01: (void)uleb(&a); break;
                case 0x09: (void)sleb(&a); break;
                default: return -1;
                }
            } else if (*k == 'S') return -1; /* a signal frame: libunwind's business */
            else return -1;
        }
        if (a.bad) return -1;
        c.p = aend;
    }
    if (c.bad || c.p > c.end) return -1;

    rd f = {fde + 8, fde + 4 + flen, 0};
    uintptr_t begin = eh_ptr(&f, fde_enc);
    rd rr = f;
    uintptr_t range;
    switch (fde_enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: range = (uintptr_t)fixed(&rr, 8); break;
    case 0x03: case 0x0b: range = (uint32_t)fixed(&rr, 4); break;
    default: return -1;
    }
    f.p = rr.p;
    if (f.bad || target < begin || target >= begin + range) return -1;
    if (has_z) f.p += uleb(&f);
    if (f.bad || f.p > f.end) return -1;

    cfa_state s = {0, -1, RULE_SAME, RULE_SAME, 0, 0}, init;
    uintptr_t loc = begin;
    if (run_cfa(&c, &loc, target, code_align, data_align, &s, NULL) != 0) return -1;
    init = s;
    if (run_cfa(&f, &loc, target, code_align, data_align, &s, &init) < 0) return -1;

    memset(out, 0, sizeof *out);
    if (s.ra_rule == RULE_UNDEF) { /* the outermost frame (_start, clone3's child) */
        out->flags = CMH_UNW_VALID | CMH_UNW_LAST;
        return 0;
    }
    if ((s.cfa_reg != R_RSP && s.cfa_reg != R_RBP) || s.cfa_off < 16 || s.cfa_off > INT32_MAX || (s.cfa_off & 7))
        return -1;
    if (s.ra_rule != RULE_OFFSET || s.ra_off != -8) return -1;
    if (s.rbp_rule == RULE_OFFSET) {
        if (s.rbp_off >= 0 || s.rbp_off < -s.cfa_off || (s.rbp_off & 7) || s.rbp_off < INT16_MIN) return -1;
        out->rbp_off = (int16_t)s.rbp_off;
    } else if (s.rbp_rule != RULE_SAME) return -1;
    out->cfa_off = (int32_t)s.cfa_off;
    out->cfa_reg = (uint8_t)s.cfa_reg;
    out->flags = CMH_UNW_VALID;
    return 0;
}

static inline uint32_t slot_of(uintptr_t pc) { return (uint32_t)((pc * 0x9E3779B97F4A7C15ull) >> (64 - CMH_UNW_BITS)); }

/* A remembered walk still holds when everything it read is as it was: the same start and
 * every word it went on from.  The walk is a function of those and of the rules of the PCs it met
 * (which are the PCs it would meet again), so the answer is the one a walk would give now.  The
 * words are read from this thread's stack, at or above rsp0 (the walk read nothing below its
 * current frame), where this call's frames now are: all mapped. */
__attribute__((no_sanitize("address"))) static int replay(const cmh_unw_memo *m, uintptr_t rsp0, uintptr_t rip0, uintptr_t rbp0, int max)
{
    if (m->rsp0 != rsp0 || m->rip0 != rip0 || m->max != max || (m->uses_rbp0 && m->rbp0 != rbp0)) return 0;
    uintptr_t diff = 0;
    for (int k = 0; k < m->nread; k++) diff |= *(const volatile uintptr_t *)m->addr[k] ^ m->val[k];
    return diff == 0;
}

/* The walk proper (see the top of the file).  Starts at the caller of this function, whose
 * frame pointer this file keeps (-fno-omit-frame-pointer). */
__attribute__((noinline, no_sanitize("address"))) int cmh_unwind_walk(void **buf, int max, cmh_unw_cache *c, cmh_unw_memo **memo)
{
    const uintptr_t *fp = __builtin_frame_address(0);
    uintptr_t hi = c->stack_hi, rip = fp[1], rsp = (uintptr_t)(fp + 2), rbp = fp[0];
    const uintptr_t rsp0 = rsp, rip0 = rip, rbp0 = rbp;
    if (rsp < c->stack_lo || rsp >= hi) return -1; /* not on the thread's own stack (sigaltstack) */
    cmh_unw_memo *m = NULL;
    if (memo) {
        *memo = NULL;
        if (max <= CMH_UNW_MEMO_MAX) {
            uint32_t set = (uint32_t)((rsp0 >> 4) ^ (rsp0 >> 12)) & (CMH_UNW_MEMO_SETS - 1);
            for (int w = 0; w < CMH_UNW_MEMO_WAYS; w++)
                if (replay(&c->memo[set][w], rsp0, rip0, rbp0, max)) {
                    *memo = &c->memo[set][w];
                    c->replays++;
                    return (*memo)->n;
                }
            m = &c->memo[set][c->next_way[set]++ & (CMH_UNW_MEMO_WAYS - 1)];
            m->rsp0 = 0; /* not a walk until this one is done */
        }
    }
    /* what the walk depends on: each return address it read, and %rbp's value where a CFA was
     * taken from it (the word it was restored from, or the register it started with) */
    int n = 0, nread = 0, uses_rbp0 = 0;
    uintptr_t rbp_at = 0; /* where rbp was last restored from; 0: the register it started with */
    int rbp_unused = 1;
    while (n < max) {
        buf[n++] = (void *)rip;
        cmh_unw_slot *sl = &c->slot[slot_of(rip)];
        if (CMH_UNLIKELY(sl->pc != rip)) {
            cmh_unw_rule r;
            if (cmh_unwind_rule(rip, &r) != 0) return -1;
            sl->r = r;
            sl->pc = rip;
            c->misses++;
        }
        const cmh_unw_rule r = sl->r;
        if (r.flags & CMH_UNW_LAST) break;
        uintptr_t cfa;
        if (r.cfa_reg == R_RSP) cfa = rsp + (uintptr_t)(intptr_t)r.cfa_off;
        else {
            cfa = rbp + (uintptr_t)(intptr_t)r.cfa_off;
            if (rbp_unused && m) {
                if (rbp_at) m->addr[nread] = rbp_at, m->val[nread++] = rbp;
                else uses_rbp0 = 1;
            }
            rbp_unused = 0;
        }
        /* validate: strictly up the stack, inside it, aligned */
        if (CMH_UNLIKELY(cfa <= rsp || cfa > hi || (cfa & 7))) return -1;
        rip = ((const uintptr_t *)cfa)[-1];
        if (m) m->addr[nread] = cfa - 8, m->val[nread++] = rip;
        if (r.rbp_off) {
            uintptr_t at = cfa + (uintptr_t)(intptr_t)r.rbp_off;
            if (CMH_UNLIKELY(at < rsp)) return -1;
            rbp = *(const uintptr_t *)at;
            rbp_at = at;
            rbp_unused = 1;
        }
        rsp = cfa;
        if (!rip) break;
    }
    if (m) {
        memcpy(m->pcs, buf, (size_t)n * sizeof *buf);
        m->n = n;
        m->nread = nread;
        m->uses_rbp0 = uses_rbp0;
        m->rbp0 = rbp0;
        m->rip0 = rip0;
        m->max = max;
        m->id = 0;
        m->skip = UINT32_MAX;
        m->rsp0 = rsp0;
        *memo = m;
    }
    return n;
}

int cmh_unwind_stack_bounds(uintptr_t *lo, uintptr_t *hi)
{
    pthread_attr_t a;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &a) != 0) return -1;
    int rc = pthread_attr_getstack(&a, &addr, &size);
    pthread_attr_destroy(&a);
    if (rc != 0) return -1;
    *lo = (uintptr_t)addr;
    *hi = (uintptr_t)addr + size;
    return 0;
}

#else /* no _dl_find_object or not x86-64: libunwind walks every stack */
int cmh_unwind_rule(uintptr_t pc, cmh_unw_rule *out)
{
    (void)pc;
    (void)out;
    return -1;
}
int cmh_unwind_walk(void **buf, int max, cmh_unw_cache *c, cmh_unw_memo **memo)
{
    (void)buf;
    (void)max;
    (void)c;
    if (memo) *memo = NULL;
    return -1;
}
int cmh_unwind_stack_bounds(uintptr_t *lo, uintptr_t *hi)
{
    *lo = *hi = 0;
    return -1;
}
#endif
