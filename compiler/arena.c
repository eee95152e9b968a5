/*
 * arena.c — bump allocation for one compilation, and string interning.
 *
 * Normal mode: memory comes from a list of chunks; an allocation bumps a
 * pointer in the newest chunk, and a request larger than a chunk gets a
 * chunk of its own. PRIMEC_ARENA_MALLOC mode: every allocation is its own
 * malloc, remembered in a list so arena_destroy can free it; ASan and
 * valgrind then see the exact bounds of every object.
 *
 * Interned strings live in the arena; the hash table that finds them is
 * plain malloc memory (it is resized, which an arena cannot do) owned by
 * the arena and freed with it. Invariant: the table is at most half full.
 */
#include "arena.h"

#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "diag.h"

/* Every allocation is aligned for any object. */
#define ARENA_ALIGN (_Alignof(max_align_t) > 16 ? _Alignof(max_align_t) : 16)
#define ARENA_CHUNK_SIZE ((size_t)64 * 1024)

typedef struct Chunk {
    struct Chunk *next;
    size_t size; /* bytes usable after the header */
    size_t used;
    /* data follows, aligned */
} Chunk;

#define CHUNK_HEADER (((sizeof(Chunk) + ARENA_ALIGN - 1) / ARENA_ALIGN) * ARENA_ALIGN)

typedef struct InternEntry {
    const char *str; /* NULL when the slot is empty */
    size_t len;
    uint32_t hash;
} InternEntry;

struct Arena {
#ifdef PRIMEC_ARENA_MALLOC
    void **blocks; /* every allocation, freed by arena_destroy */
    size_t nblocks;
    size_t capblocks;
#else
    Chunk *chunks; /* newest first */
    Chunk *spare;  /* kept by arena_reset, reused before malloc */
#endif
    InternEntry *intern;
    size_t intern_cap; /* a power of two, or 0 */
    size_t intern_count;
};

static void *xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p)
        ICE("out of memory (allocating %zu bytes)", size);
    return p;
}

#ifdef PRIMEC_ARENA_MALLOC
/* One allocation's block, given back (the budget counts what malloc
 * reserved for it). */
static void free_block(void *p) {
    budget_release(malloc_usable_size(p));
    free(p);
}
#endif

Arena *arena_create(void) {
    Arena *arena = xmalloc(sizeof(Arena));
    memset(arena, 0, sizeof(*arena));
    return arena;
}

void arena_destroy(Arena *arena) {
    if (!arena)
        return;
#ifdef PRIMEC_ARENA_MALLOC
    for (size_t i = 0; i < arena->nblocks; i++)
        free_block(arena->blocks[i]);
    free(arena->blocks);
#else
    for (int list = 0; list < 2; ++list) {
        Chunk *c = list ? arena->spare : arena->chunks;
        while (c) {
            Chunk *next = c->next;
            budget_release(CHUNK_HEADER + c->size);
            free(c);
            c = next;
        }
    }
#endif
    free(arena->intern);
    free(arena);
}

void arena_reset(Arena *arena) {
#ifdef PRIMEC_ARENA_MALLOC
    for (size_t i = 0; i < arena->nblocks; i++)
        free_block(arena->blocks[i]);
    arena->nblocks = 0;
#else
    Chunk *c = arena->chunks;
    while (c) {
        Chunk *next = c->next;
        c->used = 0;
        c->next = arena->spare;
        arena->spare = c;
        c = next;
    }
    arena->chunks = NULL;
#endif
    if (arena->intern_cap)
        memset(arena->intern, 0, arena->intern_cap * sizeof(InternEntry));
    arena->intern_count = 0;
}

#ifndef PRIMEC_ARENA_MALLOC
/* A chunk with room for `need` bytes: the smallest spare one that fits,
 * or a new one. */
static Chunk *take_chunk(Arena *arena, size_t need) {
    Chunk **best = NULL;
    for (Chunk **link = &arena->spare; *link; link = &(*link)->next)
        if ((*link)->size >= need && (!best || (*link)->size < (*best)->size))
            best = link;
    if (best) {
        Chunk *c = *best;
        *best = c->next;
        return c;
    }
    size_t cap = need > ARENA_CHUNK_SIZE ? need : ARENA_CHUNK_SIZE;
    Chunk *fresh = xmalloc(CHUNK_HEADER + cap);
    budget_charge(CHUNK_HEADER + cap);
    fresh->size = cap;
    fresh->used = 0;
    return fresh;
}
#endif

void *arena_alloc(Arena *arena, size_t size) {
    void *p = arena_alloc_uninit(arena, size);
    memset(p, 0, size);
    return p;
}

void *arena_alloc_uninit(Arena *arena, size_t size) {
#ifdef PRIMEC_ARENA_MALLOC
    if (arena->nblocks == arena->capblocks) {
        size_t cap = arena->capblocks ? arena->capblocks * 2 : 256;
        void **blocks = realloc(arena->blocks, cap * sizeof(void *));
        if (!blocks)
            ICE("out of memory (arena block list)");
        arena->blocks = blocks;
        arena->capblocks = cap;
    }
    void *p = malloc(size ? size : 1);
    if (!p)
        ICE("out of memory (allocating %zu bytes)", size);
    arena->blocks[arena->nblocks++] = p;
    budget_charge(malloc_usable_size(p));
    return p;
#else
    if (size > SIZE_MAX - ARENA_ALIGN - CHUNK_HEADER)
        ICE("out of memory (allocating %zu bytes)", size);
    size_t need = (size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (need == 0)
        need = ARENA_ALIGN;
    Chunk *c = arena->chunks;
    if (!c || c->size - c->used < need) {
        Chunk *fresh = take_chunk(arena, need);
        if (c && need > ARENA_CHUNK_SIZE) {
            /* A big block goes behind the current chunk, so the current
             * chunk's free space stays usable. */
            fresh->next = c->next;
            c->next = fresh;
        } else {
            fresh->next = c;
            arena->chunks = fresh;
        }
        c = fresh;
    }
    char *p = (char *)c + CHUNK_HEADER + c->used;
    c->used += need;
    return p;
#endif
}

char *arena_strndup(Arena *arena, const char *s, size_t n) {
    if (n == SIZE_MAX)
        ICE("out of memory (string of %zu bytes)", n);
    char *p = arena_alloc(arena, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *arena_strdup(Arena *arena, const char *s) {
    return arena_strndup(arena, s, strlen(s));
}

char *arena_printf(Arena *arena, const char *fmt, ...) {
    /* One formatting pass when the result fits in `buf` (most do). */
    char buf[256];
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        ICE("arena_printf: bad format '%s'", fmt);
    char *p = arena_alloc_uninit(arena, (size_t)n + 1);
    if ((size_t)n < sizeof buf)
        memcpy(p, buf, (size_t)n + 1);
    else
        vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

/* FNV-1a. */
static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static void intern_grow(Arena *arena) {
    size_t cap = arena->intern_cap ? arena->intern_cap * 2 : 256;
    InternEntry *table = calloc(cap, sizeof(InternEntry));
    if (!table)
        ICE("out of memory (intern table of %zu entries)", cap);
    for (size_t i = 0; i < arena->intern_cap; i++) {
        InternEntry *e = &arena->intern[i];
        if (!e->str)
            continue;
        size_t j = e->hash & (cap - 1);
        while (table[j].str)
            j = (j + 1) & (cap - 1);
        table[j] = *e;
    }
    free(arena->intern);
    arena->intern = table;
    arena->intern_cap = cap;
}

const char *arena_intern(Arena *arena, const char *s, size_t n) {
    if (2 * (arena->intern_count + 1) > arena->intern_cap)
        intern_grow(arena);
    uint32_t h = hash_bytes(s, n);
    size_t mask = arena->intern_cap - 1;
    size_t i = h & mask;
    for (;;) {
        InternEntry *e = &arena->intern[i];
        if (!e->str) {
            e->str = arena_strndup(arena, s, n);
            e->len = n;
            e->hash = h;
            arena->intern_count++;
            return e->str;
        }
        if (e->hash == h && e->len == n && memcmp(e->str, s, n) == 0)
            return e->str;
        i = (i + 1) & mask;
    }
}

void ptrvec_push(Arena *arena, PtrVec *vec, void *item) {
    if (vec->count == vec->cap) {
        if (vec->cap > (1 << 29))
            ICE("ptrvec_push: vector too large");
        int cap = vec->cap ? vec->cap * 2 : 4;
        void **items = ARENA_ARRAY(arena, void *, cap);
        if (vec->count)
            memcpy(items, vec->items, sizeof(void *) * (size_t)vec->count);
        vec->items = items;
        vec->cap = cap;
    }
    vec->items[vec->count++] = item;
}
