/*
 * arena.h — one arena per compilation.
 *
 * AST nodes, symbols, IR, plans and interned strings are allocated from
 * an Arena and freed together by arena_destroy; nothing is freed one node
 * at a time. Built with PRIMEC_ARENA_MALLOC, every allocation is a real
 * malloc (kept on a list and freed at the end) so that ASan and valgrind
 * see each object's bounds.
 *
 * Out of memory is not a user error: it is reported as an internal error
 * (exit code 3) by arena_alloc itself.
 */
#ifndef PRIMEC_ARENA_H
#define PRIMEC_ARENA_H

#include <stddef.h>

typedef struct Arena Arena;

Arena *arena_create(void);
void arena_destroy(Arena *arena);
/* Frees every allocation at once but keeps the arena's memory for the
 * next allocations (a scratch arena reused in a loop touches pages that
 * are already mapped and in cache). Interned strings are forgotten. */
void arena_reset(Arena *arena);
/* Zero-filled, aligned for any object. */
void *arena_alloc(Arena *arena, size_t size);
/* Not zero-filled: for large arrays whose entries are initialised one by
 * one when first used (touching only what is used). */
void *arena_alloc_uninit(Arena *arena, size_t size);
/* Copies n bytes of s and NUL-terminates. */
char *arena_strndup(Arena *arena, const char *s, size_t n);
char *arena_strdup(Arena *arena, const char *s);
/* printf into the arena. */
char *arena_printf(Arena *arena, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Interns a string: equal strings give the same pointer for the arena's
 * lifetime, so symbols compare with ==. */
const char *arena_intern(Arena *arena, const char *s, size_t n);

/* A growable array of pointers living in an arena. */
typedef struct PtrVec {
    void **items;
    int count;
    int cap;
} PtrVec;
void ptrvec_push(Arena *arena, PtrVec *vec, void *item);

#define ARENA_NEW(arena, type) ((type *)arena_alloc((arena), sizeof(type)))
#define ARENA_ARRAY(arena, type, n) ((type *)arena_alloc((arena), sizeof(type) * (size_t)(n)))
/* For arrays the caller fills completely. */
#define ARENA_ARRAY_UNINIT(arena, type, n)                                                         \
    ((type *)arena_alloc_uninit((arena), sizeof(type) * (size_t)(n)))

#endif
