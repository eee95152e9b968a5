/*
 * ast.h — the abstract syntax tree of .prime source.
 *
 * The grammar builds these nodes and nothing else (no checks in grammar
 * actions); later passes read them. Every node carries the Span of the
 * source it came from. Names are interned (arena_intern), so two names
 * are the same symbol iff their pointers are equal. All nodes live in the
 * compilation's arena.
 *
 * The language, in brief (docs/language.md has the full reference):
 *
 *   op matmul(X[m, k], W[k, n]) -> Y[m, n] { Y[m, n] += X[m, k] * W[k, n]; }
 *   partition square of matmul on mesh(i: P, j: P) steps(t: P) {
 *       m = i; n = j; k = (i + j + t) % P;
 *   }
 *   model mm { param m = 96, k = 64, n = 80; mesh(i: 2, j: 2);
 *              input x[m, k]; weight w[k, n];
 *              y = matmul(x, w) use square; }
 */
#ifndef PRIMEC_AST_H
#define PRIMEC_AST_H

#include "arena.h"
#include <stdio.h>

#include "source.h"

typedef const char *Sym; /* interned name */

typedef enum ExprKind {
#define X(kind, name) kind,
#include "ast.def"
#undef X
    EXPR_KIND_COUNT
} ExprKind;

const char *ast_expr_kind_name(ExprKind kind);

/* A name with its position. */
typedef struct Ident {
    Sym name;
    Span span;
} Ident;

typedef struct Expr Expr;
struct Expr {
    ExprKind kind;
    Span span;
    long value; /* EXPR_INT */
    Sym name;   /* EXPR_NAME, EXPR_INDEX, EXPR_CALL */
    Span name_span;
    char op;     /* EXPR_BINARY: '+', '-', '*', '/', '%', '^' */
    Expr *lhs;   /* EXPR_BINARY; EXPR_NEG operand */
    Expr *rhs;   /* EXPR_BINARY */
    PtrVec args; /* EXPR_CALL, EXPR_RADIX: Expr*; EXPR_INDEX: Ident* (dimension names) */
    /* Set by the constructors, so that no pass needs to recurse to learn
     * them: depth counts the nodes on the longest path to a leaf (1 for a
     * leaf); nodes counts the nodes of the tree as a recursive walk visits
     * them (a subexpression shared by a derivative counts once per use).
     * Both saturate at AST_COUNT_MAX. */
    int depth;
    int nodes;
};

#define AST_COUNT_MAX (1 << 30)

/* The limits the parser enforces on every expression (parse.c), so that
 * the recursive passes over expressions (resolve, partition, autodiff,
 * schedule, cost, emit and the printers) run in bounded stack and time. */
#define AST_MAX_EXPR_DEPTH 256
#define AST_MAX_EXPR_NODES 10000

/* X[m, k] in an op signature. */
typedef struct TensorParam {
    Ident name;
    PtrVec dims; /* Ident* */
    Span span;
} TensorParam;

typedef enum StmtKind {
    STMT_ACCUM,  /* Y[m, n] += expr;  sums over dimensions absent from Y */
    STMT_ASSIGN, /* Y = expr;  or  Y[m, n] = expr;  elementwise */
    STMT_MAX,    /* Y[m] max= expr;  the maximum over dimensions absent from Y */
    STMT_GRAD    /* grad X = expr;  a stated derivative: dX += expr, which may name
                  * dY, the incoming gradient; used instead of the derived one */
} StmtKind;

typedef struct Stmt {
    StmtKind kind;
    Span span;
    Ident target;
    PtrVec target_dims; /* Ident*; empty when written without brackets */
    int has_dims;
    Expr *value;
} Stmt;

typedef struct OpDecl {
    Ident name;
    Span span;
    PtrVec params; /* TensorParam*: inputs */
    TensorParam *result;
    PtrVec body; /* Stmt*; empty for a composite */
    /* A composite operator, `op f(...) -> y[...] = { parts }`: a graph of
     * other operators, expanded where it is used (compose.c). */
    int is_composite;
    PtrVec parts; /* ModelItem* (MITEM_INSTANCE without `use`) */
} OpDecl;

/* `i: P` in mesh(...) or steps(...). size is EXPR_INT or EXPR_NAME. */
typedef struct AxisDecl {
    Ident name;
    Expr *size;
    Span span;
} AxisDecl;

/* `k = (i + j + t) % P;` */
typedef struct DsiAssign {
    Ident dim;
    Expr *value;
    Span span;
} DsiAssign;

typedef struct PartitionDecl {
    Ident name;
    Span span;
    Ident of_op;     /* the (first) operator whose dimensions it splits; no name: by role */
    PtrVec of_ops;   /* Ident*: every operator named after `of`; empty: by role (every
                      * operator with the dimensions the DSIs name) */
    PtrVec mesh;     /* AxisDecl* */
    AxisDecl *steps; /* NULL when the partition is purely spatial */
    PtrVec dsis;     /* DsiAssign* */
} PartitionDecl;

typedef enum ModelItemKind {
    MITEM_PARAM,    /* param a = 1, b = 2;  (one item per name) */
    MITEM_MESH,     /* mesh(i: 2, j: 2); */
    MITEM_INPUT,    /* input x[m, k]; */
    MITEM_WEIGHT,   /* weight w[k, n]; */
    MITEM_INSTANCE, /* y = matmul(x, w) use square(i: i, j: j); */
    MITEM_STRICT,   /* strict; */
    MITEM_LAYER,    /* layer(x -> y) repeat L { items }: the items, L times */
    MITEM_STAGES,   /* stages s;  the layer's copies in runs over mesh axis s (name) */
    MITEM_MICRO,    /* microbatches b: M;  param b split into M micro-batches (name, value) */
    MITEM_COMPOSITE /* made by compose.c before a composite's parts: the use's arguments,
                     * checked against the composite's signature */
} ModelItemKind;

/* A dimension of a model tensor: a param name or an integer literal. */
typedef struct ModelDim {
    Expr *size; /* EXPR_NAME or EXPR_INT */
} ModelDim;

/* `use square(i: x, j: y)`: axis bindings are optional. */
typedef struct UseClause {
    Ident partition;
    PtrVec bindings; /* AxisBinding* */
    Span span;
    const char *origin; /* a plan's rule: "plan P, FILE:LINE" (resolve_run.c); else NULL */
} UseClause;

/* `i: rows` binds an axis; `m = s` (is_rename) renames a dimension: the
 * partition's dimension m is the operator's dimension s. */
typedef struct AxisBinding {
    Ident part_axis; /* the partition's axis; the partition's dimension when is_rename */
    Ident mesh_axis; /* the model mesh's axis; the operator's dimension when is_rename */
    Span span;
    int is_rename;
} AxisBinding;

typedef struct ModelItem {
    ModelItemKind kind;
    Span span;
    Ident name;    /* param, tensor, or instance result name */
    Expr *value;   /* MITEM_PARAM; MITEM_MICRO: the count */
    int order;     /* MITEM_MICRO: MicroOrder */
    int recompute; /* MITEM_MICRO: `recompute` written (Model.recompute) */
    Span recompute_span;
    PtrVec axes;     /* MITEM_MESH: AxisDecl* */
    PtrVec dims;     /* MITEM_INPUT/WEIGHT: Expr* (EXPR_NAME or EXPR_INT) */
    Ident op;        /* MITEM_INSTANCE */
    PtrVec args;     /* MITEM_INSTANCE: Ident* */
    UseClause *use;  /* MITEM_INSTANCE: NULL when the planner chooses */
    Ident layer_in;  /* MITEM_LAYER: the block's input name */
    Ident layer_out; /* MITEM_LAYER: the block's output name */
    Expr *repeat;    /* MITEM_LAYER: how many times */
    PtrVec items;    /* MITEM_LAYER: ModelItem* */
    /* MITEM_INPUT/WEIGHT: `from "NAME" [transposed]`, the safetensors name
     * the value is loaded from and saved under (`{layer}` stands for the
     * copy of a repeated layer); NULL when not given. */
    const char *file_name;
    Span file_span;
    int file_transposed; /* the file holds the 2-D tensor's transpose */
    /* Made by compose.c (NULL / empty in a written model): */
    const OpDecl *composite;      /* MITEM_COMPOSITE: the composite used */
    int nparts;                   /* MITEM_COMPOSITE: the parts that follow it */
    const struct ModelItem *site; /* a part: the written use of the outermost composite */
    PtrVec groups;                /* a part: Sym, the composite instances it is a part of,
                                   * outermost first */
    Sym alias;                    /* the part computing a composite's result: USE_RESULT */
} ModelItem;

typedef struct ModelDecl {
    Ident name;
    Span span;
    PtrVec items; /* ModelItem* */
} ModelDecl;

typedef enum DeclKind {
    DECL_OP,
    DECL_PARTITION,
    DECL_MODEL,
    DECL_IMPORT,
    DECL_SHAPE, /* shape small of opt { param s = 16, h = 64; } */
    DECL_PLAN,  /* plan megatron of opt on mesh(d: P) { rules } */
    DECL_RUN    /* run opt_small = megatron(P = 4) on small; */
} DeclKind;

/* ---- shapes, plans and runs (docs/language.md, "Plans") ---------------- */

/* shape NAME of MODEL { param a = 1, b = 2; }: values for the model's params. */
typedef struct ShapeDecl {
    Ident name;
    Span span;
    Ident of_model;
    PtrVec params; /* ModelItem* (MITEM_PARAM) */
} ShapeDecl;

/* One target of a plan rule: an instance `q`, or the range `q .. ao` of
 * the instances from q to ao in definition order (one block: the model's
 * top level or one layer body). */
typedef struct PlanTarget {
    Ident first;
    Ident last; /* == first when not a range */
    int is_range;
    Span span;
} PlanTarget;

/* `q, k .. v use heads;` or `default replicate;`, or `stages s;`
 * (stages set: no targets and no use). */
typedef struct PlanRule {
    Span span;
    int is_default;
    PtrVec targets; /* PlanTarget*; empty for the default */
    UseClause *use;
    ModelItem *stages; /* MITEM_STAGES: the plan's pipeline stages */
    ModelItem *micro;  /* MITEM_MICRO: the plan's micro-batches */
} PlanRule;

/* plan NAME of MODEL on mesh(axes) { rules }, or
 * plan NAME extends BASE [on mesh(axes)] { rules }. */
typedef struct PlanDecl {
    Ident name;
    Span span;
    Ident of_model; /* name NULL when the plan extends another */
    Ident base;     /* name NULL when it extends none */
    int has_mesh;
    Span mesh_span;
    PtrVec mesh;  /* AxisDecl* */
    PtrVec rules; /* PlanRule* */
} PlanDecl;

/* run NAME = PLAN(sizes) on SHAPE(params);  SHAPE may be the model itself. */
typedef struct RunDecl {
    Ident name;
    Span span;
    Ident plan;
    PtrVec plan_args;  /* ModelItem* (MITEM_PARAM): the plan's mesh sizes, or devices */
    Ident shape;       /* name NULL: the model's own params */
    PtrVec shape_args; /* ModelItem* (MITEM_PARAM): model params over the shape's */
} RunDecl;

/* import "other.prime";  path relative to the importing file. */
typedef struct ImportDecl {
    const char *path; /* unquoted */
    Span path_span;   /* the string literal, quotes included */
} ImportDecl;

typedef struct Decl {
    DeclKind kind;
    Span span;
    OpDecl *op;
    PartitionDecl *partition;
    ModelDecl *model;
    ImportDecl *import;
    ShapeDecl *shape;
    PlanDecl *plan;
    RunDecl *run;
} Decl;

/* One parsed file. */
typedef struct Program {
    uint32_t file;
    PtrVec decls; /* Decl* */
} Program;

/* Constructors used by the grammar. */
Expr *ast_new_int(Arena *a, Span span, long value);
Expr *ast_new_name(Arena *a, Ident name);
Expr *ast_new_index(Arena *a, Span span, Ident name, PtrVec dims);
Expr *ast_new_binary(Arena *a, Span span, char op, Expr *lhs, Expr *rhs);
Expr *ast_new_neg(Arena *a, Span span, Expr *operand);
Expr *ast_new_call(Arena *a, Span span, Ident name, PtrVec args);
Expr *ast_new_radix(Arena *a, Span span, PtrVec parts);

/* Constructors for the other nodes, also used by the grammar. PtrVecs
 * are taken by value (the node keeps the items array). */
Ident *ast_new_ident(Arena *a, Ident ident);
TensorParam *ast_new_tensor_param(Arena *a, Span span, Ident name, PtrVec dims);
Stmt *ast_new_stmt(Arena *a, Span span, StmtKind kind, Ident target, int has_dims, PtrVec dims,
                   Expr *value);
OpDecl *ast_new_op(Arena *a, Span span, Ident name, PtrVec params, TensorParam *result,
                   PtrVec body);
/* A composite operator: parts are ModelItem* (MITEM_INSTANCE). */
OpDecl *ast_new_composite(Arena *a, Span span, Ident name, PtrVec params, TensorParam *result,
                          PtrVec parts);
AxisDecl *ast_new_axis(Arena *a, Span span, Ident name, Expr *size);
DsiAssign *ast_new_dsi(Arena *a, Span span, Ident dim, Expr *value);
PartitionDecl *ast_new_partition(Arena *a, Span span, Ident name, PtrVec of_ops, PtrVec mesh,
                                 AxisDecl *steps, PtrVec dsis);
ModelItem *ast_new_param_item(Arena *a, Span span, Ident name, Expr *value);
ModelItem *ast_new_mesh_item(Arena *a, Span span, PtrVec axes);
/* kind is MITEM_INPUT or MITEM_WEIGHT. */
ModelItem *ast_new_tensor_item(Arena *a, Span span, ModelItemKind kind, Ident name, PtrVec dims);
/* The `from "NAME" [transposed]` of an input or weight (source NULL: none). */
typedef struct TensorSource {
    const char *name;
    Span span;
    int transposed;
} TensorSource;
ModelItem *ast_set_tensor_source(ModelItem *it, const TensorSource *source);
ModelItem *ast_new_instance_item(Arena *a, Span span, Ident result, Ident op, PtrVec args,
                                 UseClause *use);
ModelItem *ast_new_strict_item(Arena *a, Span span);
/* `stages AXIS;` (a model item, or a plan's clause: ast_new_plan_stages). */
ModelItem *ast_new_stages_item(Arena *a, Span span, Ident axis);
/* The order of the micro-batches' phases (`microbatches b: M order O;`):
 * GPipe's (every forward, then every backward), the default, or 1F1B's
 * (docs/language.md, "Micro-batches"). */
typedef enum MicroOrder { MICRO_GPIPE, MICRO_1F1B } MicroOrder;

/* `microbatches PARAM: COUNT [order ORDER];` (a model item, or a plan's
 * clause). */
ModelItem *ast_new_micro_item(Arena *a, Span span, Ident param, Expr *count, int order);
/* The clause's `recompute` (the word's span): it, or NULL (it was NULL). */
ModelItem *ast_set_micro_recompute(ModelItem *it, Span word);
ModelItem *ast_new_layer_item(Arena *a, Span span, Ident in, Ident out, Expr *repeat, PtrVec items);
UseClause *ast_new_use(Arena *a, Span span, Ident partition, PtrVec bindings);
AxisBinding *ast_new_binding(Arena *a, Span span, Ident part_axis, Ident mesh_axis);
/* `m = s` in a use's bindings: the partition's dimension m is the operator's s. */
AxisBinding *ast_new_rename(Arena *a, Span span, Ident part_dim, Ident op_dim);
ModelDecl *ast_new_model(Arena *a, Span span, Ident name, PtrVec items);
/* A declaration of that kind; the caller sets its member. */
Decl *ast_new_decl(Arena *a, DeclKind kind, Span span);
Decl *ast_new_op_decl(Arena *a, OpDecl *op);
Decl *ast_new_partition_decl(Arena *a, PartitionDecl *partition);
Decl *ast_new_model_decl(Arena *a, ModelDecl *model);
/* span: the whole declaration; path: unquoted, unescaped. */
Decl *ast_new_import_decl(Arena *a, Span span, const char *path, Span path_span);

/* Shapes, plans and runs (compiler/ast_plan.c). */
ShapeDecl *ast_new_shape(Arena *a, Span span, Ident name, Ident of_model, PtrVec params);
PlanTarget *ast_new_plan_target(Arena *a, Span span, Ident first, Ident last, int is_range);
PlanRule *ast_new_plan_rule(Arena *a, Span span, int is_default, PtrVec targets, UseClause *use);
PlanRule *ast_new_plan_stages(Arena *a, Span span, Ident axis);
PlanRule *ast_new_plan_micro(Arena *a, Span span, Ident param, Expr *count, int order);
/* of_model or base has a NULL name where absent; mesh is empty when !has_mesh. */
PlanDecl *ast_new_plan(Arena *a, Span span, Ident name, Ident of_model, Ident base, int has_mesh,
                       Span mesh_span, PtrVec mesh, PtrVec rules);
RunDecl *ast_new_run(Arena *a, Span span, Ident name, Ident plan, PtrVec plan_args, Ident shape,
                     PtrVec shape_args);
Decl *ast_new_shape_decl(Arena *a, ShapeDecl *shape);
Decl *ast_new_plan_decl(Arena *a, PlanDecl *plan);
Decl *ast_new_run_decl(Arena *a, RunDecl *run);
/* The S-expression of a shape, plan or run declaration (ast_dump_program). */
void ast_dump_plan_decl(const Decl *d, FILE *out, int level);

typedef enum AstIntStatus {
    AST_INT_OK,
    AST_INT_DIV_ZERO, /* `/` or `%` by zero */
    AST_INT_OVERFLOW  /* the result does not fit in 64 bits */
} AstIntStatus;

/* The integer value of `a op b` for op in + - * / % ^ (% is the
 * mathematical modulo, in [0, |b|)), in checked 64-bit arithmetic: *out
 * is set only on AST_INT_OK. The one arithmetic of DSIs and model
 * parameters. */
AstIntStatus ast_int_op(char op, long a, long b, long *out);
/* -a, checked: AST_INT_OVERFLOW for the most negative 64-bit integer. */
AstIntStatus ast_int_neg(long a, long *out);

/* Writes a readable S-expression dump (for --dump-after=parse and golden
 * tests). Deterministic. */
void ast_dump_program(const Program *program, FILE *out);
void ast_dump_expr(const Expr *expr, FILE *out);
/* Prints an expression back as source text (fully parenthesised where
 * needed), used in explain and in comments of emitted code. */
void ast_print_expr(const Expr *expr, FILE *out);

#endif
