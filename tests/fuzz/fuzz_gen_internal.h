/*
 * fuzz_gen_internal.h — what the generator's two files share: the output
 * buffer, the choice reader, and the generator's view of operators,
 * partitions, tensors and instances (fuzz_gen.c writes operators,
 * partitions and models; fuzz_gen_compose.c the composites, partitions
 * by role and their renamings, weight sources and plans).
 */
#ifndef PRIMEC_FUZZ_GEN_INTERNAL_H
#define PRIMEC_FUZZ_GEN_INTERNAL_H

#include "fuzz_gen.h"

typedef struct Buf {
    char *p;
    size_t len, cap;
} Buf;

void put(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Every choice is `pick(r, k)`: the next byte modulo k, or 0 once the
 * bytes are exhausted. `oops(r)`: a deliberate mistake here? */
typedef struct Reader {
    const uint8_t *p;
    size_t n, i;
    unsigned oops_rate; /* out of 256; 0: no deliberate mistakes */
} Reader;

unsigned pick(Reader *r, unsigned k);
int oops(Reader *r);

#define MAX_PARTS FUZZ_MAX_PARTITIONS
#define MAX_USER_OPS 3
#define MAX_USER_COMPS 3
#define MAX_ROLES 3
#define MAX_TENSORS 64
#define MAX_INSTANCES 64
/* Operator instances of one model, layer copies counted, beyond which no
 * composite is drawn: a composite expands into up to 10, and a model of
 * hundreds of instances takes seconds in the sanitized build. */
#define MAX_EXPANDED 64
#define NPARAMS 5

typedef FuzzPartition GPart;

/* A partition by role (no `of`): the dimensions its DSIs name. */
typedef struct GRole {
    GPart part;
    int ndsi;
    const char *dsi[2];
} GRole;

typedef struct GOp {
    FuzzSig sig; /* sig.name is the operator's name */
    int npart;
    GPart part[MAX_PARTS];
    const FuzzComposite *comp; /* a stdlib composite, else NULL */
    int is_comp;               /* a composite (the stdlib's or the program's) */
    int ninst;                 /* the operator instances one use expands into */
} GOp;

typedef struct GTensor {
    char name[24];
    int rank;
    int dims[IR_MAX_DIMS]; /* >= 0: param index; < 0: the literal -dims[i] */
    int layer_depth;       /* 0 outside every layer block */
} GTensor;

/* An instance written in the model (for the rules of a plan). */
typedef struct GInst {
    char name[24];
    const GOp *op;
    int block;  /* 0: the model's top level; else the layer block's number */
    int copies; /* the layer's repeat count; 0 outside a layer */
} GInst;

typedef struct Gen {
    Reader *r;
    Buf *out;
    const FuzzTable *t;
    int nops;
    GOp *ops;
    char user_names[MAX_USER_OPS + MAX_USER_COMPS + MAX_ROLES + 16][16];
    int nuser_names;
    int nroles;
    GRole roles[MAX_ROLES];
    /* the model being generated */
    char model_name[16];
    char mesh_text[160]; /* `mesh(...)`, as the model wrote it */
    int mesh_naxes;
    const char *mesh_axis[3];
    int ntensors;
    GTensor tensors[MAX_TENSORS];
    int ninst;
    GInst inst[MAX_INSTANCES];
    long expanded; /* operator instances so far, layer copies counted */
    int counter;
    int depth;         /* inside a layer block */
    int nblocks;       /* layer blocks so far in the model */
    int block;         /* the block being written (GInst.block) */
    long block_copies; /* its repeat count */
} Gen;

const char *user_name(Gen *g, const char *fmt, int n);
void add_part(GOp *op, const char *name, int naxes, const char *const *axes);
/* `NAME[dims]` of input `in` of sig. */
void put_ref(Gen *g, const FuzzSig *sig, int in);

/* fuzz_gen_compose.c */

/* The stdlib's composites, into t (after its operators). */
void fuzz_table_add_composites(FuzzTable *t, const PtrVec *programs);
/* `op cN(...) -> Y[...] = { parts }` over the operators so far. */
void gen_user_composite(Gen *g, GOp *op, int n);
/* `partition rN on mesh(...) { m = d; }`: a partition by role. */
void gen_role_partition(Gen *g, int n);
/* ` use PART` with its bindings: one of op's partitions, or sometimes a
 * partition by role renamed onto op's dimensions. */
void put_use(Gen *g, const GOp *op, const GPart *p);
int put_role_use(Gen *g, const GOp *op);
/* ` from "NAME" [transposed]` after a weight of rank `rank`, or nothing. */
void put_source(Gen *g, const char *name, int rank);
/* A plan of the model just generated, and a run of it; or nothing. */
void gen_plan(Gen *g, int n);

#endif
