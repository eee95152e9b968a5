/*
 * parser.y — the grammar of .prime files (Bison: pure, located, LALR(1)
 * with LAC, %expect 0).
 *
 * Actions only build AST nodes (ast_new_* and list pushes); every check
 * lives in a later pass. Locations are Spans: a rule's span runs from its
 * first symbol's start to its last symbol's end (YYLLOC_DEFAULT below).
 *
 * Syntax errors are reported by yyreport_syntax_error in the style
 * `unexpected 'steps', expecting '{'`, with a note where a cheap hint
 * applies (a missing ';', an unclosed '{', a keyword used as a name).
 * Recovery: `error ';'` inside bodies resumes at the next statement,
 * `'{' ... error '}'` closes a body, and `error ';'` / `error '}'` at
 * declaration level resume at the next declaration, so independent
 * errors are all reported.
 */

%code top {
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
}

%code requires {
#include <stdint.h>

#include "ast.h"
#include "diag.h"

/* The state of one parse: the lexer's cursor and the parser's output.
 * Lives on parse_file's stack; shared by yylex and the grammar. */
typedef struct ParseCtx {
    Arena *arena;
    DiagSink *sink;
    const SourceFile *src;
    uint32_t file;
    Program *program;

    /* Lexer state: the text is NUL-terminated at end. */
    const unsigned char *base;
    const unsigned char *cur;
    const unsigned char *end;
    uint32_t last_lo, last_hi; /* span of the last token returned */
    uint32_t prev_hi;          /* end of the token before it */
    int ntokens;               /* tokens returned so far */
    /* Offsets of the '{' not yet closed, innermost last (for hints). */
    uint32_t braces[64];
    int brace_depth;
} ParseCtx;
}

%code provides {
/* Both defined in grammar/lexer.re. */
int yylex(YYSTYPE *lval, Span *lloc, ParseCtx *ctx);
/* Prepares ctx to lex and parse one file of the source map into a fresh
 * Program. */
void parse_ctx_init(ParseCtx *ctx, Arena *arena, const SourceMap *sources, uint32_t file,
                    DiagSink *sink);
}

%code {
/* A rule's span covers its symbols; an empty rule gets an empty span at
 * the end of what precedes it. */
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                  \
    do {                                                             \
        if (N) {                                                     \
            (Cur).file = YYRHSLOC(Rhs, 1).file;                      \
            (Cur).lo = YYRHSLOC(Rhs, 1).lo;                          \
            (Cur).hi = YYRHSLOC(Rhs, N).hi;                          \
        } else {                                                     \
            (Cur).file = YYRHSLOC(Rhs, 0).file;                      \
            (Cur).lo = (Cur).hi = YYRHSLOC(Rhs, 0).hi;               \
        }                                                            \
    } while (0)

static void yyerror(Span *loc, ParseCtx *ctx, const char *msg);
static PtrVec vec_one(Arena *arena, void *item);
static PtrVec vec_push(Arena *arena, PtrVec vec, void *item);
static PtrVec vec_append(Arena *arena, PtrVec vec, PtrVec more);
static TensorSource tensor_source(ParseCtx *ctx, Ident from, const char *name, Span span,
                                  const Ident *transposed);
static int stages_word(ParseCtx *ctx, const Ident *word);
static int micro_word(ParseCtx *ctx, const Ident *word);
static int micro_order(ParseCtx *ctx, const Ident *word, const Ident *value);
static int micro_recompute(ParseCtx *ctx, const Ident *word, int after_count);
}

%define api.pure full
%define api.location.type {Span}
%define api.token.prefix {TOK_}
%define parse.error custom
%define parse.lac full
%locations
%param {ParseCtx *ctx}
%expect 0

%initial-action { @$ = (Span){ctx->file, 0, 0}; }

%union {
    Sym sym;
    long num;
    const char *str;
    int kind;
    Ident ident;
    PtrVec vec;
    Expr *expr;
    TensorParam *tparam;
    Stmt *stmt;
    AxisDecl *axis;
    DsiAssign *dsi;
    ModelItem *item;
    UseClause *use;
    AxisBinding *binding;
    Decl *decl;
    OpDecl *op;
    PartitionDecl *partition;
    ModelDecl *model;
    PlanTarget *target;
    PlanRule *rule;
    TensorSource source;
}

%token <sym> IDENT "identifier"
%token <num> INT "integer"
%token <str> STRING "string"
/* Keywords: keep them together, OP first and IMPORT last (the error
 * reporter tests for a keyword by that range). */
%token OP "'op'"
%token PARTITION "'partition'"
%token OF "'of'"
%token ON "'on'"
%token MESH "'mesh'"
%token STEPS "'steps'"
%token MODEL "'model'"
%token SHAPE "'shape'"
%token PLAN "'plan'"
%token RUN "'run'"
%token EXTENDS "'extends'"
%token DEFAULT "'default'"
%token PARAM "'param'"
%token INPUT "'input'"
%token WEIGHT "'weight'"
%token USE "'use'"
%token STRICT "'strict'"
%token LAYER "'layer'"
%token GRAD "'grad'"
%token REPEAT "'repeat'"
%token IMPORT "'import'"
%token PLUS_EQ "'+='"
%token MAX_EQ "'max='"
%token ARROW "'->'"
%token DOTDOT "'..'"

%left '^'
%left '+' '-'
%left '*' '/' '%'
%precedence NEG

%type <ident> name
%type <vec> idents dimlist tparams stmts op_body axes dsis partition_body composite_body parts
%type <vec> mitems model_body params dims dimexprs args bindings exprs radix
%type <kind> assign_op
%type <expr> expr primary dimexpr
%type <tparam> tparam
%type <stmt> stmt
%type <axis> axis steps
%type <dsi> dsi
%type <item> mitem param part
%type <source> source
%type <use> use
%type <binding> binding
%type <decl> decl
%type <op> op_decl
%type <partition> partition_decl
%type <model> model_decl
%type <vec> shape_params plan_rules plan_targets run_args
%type <target> plan_target
%type <rule> plan_rule
%type <use> plan_use
%type <decl> shape_decl plan_decl run_decl

%%

file
    : %empty
    | file decl             { if ($2) ptrvec_push(ctx->arena, &ctx->program->decls, $2); }
    ;

decl
    : IMPORT STRING ';'     { $$ = ast_new_import_decl(ctx->arena, @$, $2, @2); }
    | op_decl               { $$ = ast_new_op_decl(ctx->arena, $1); }
    | partition_decl        { $$ = ast_new_partition_decl(ctx->arena, $1); }
    | model_decl            { $$ = ast_new_model_decl(ctx->arena, $1); }
    | shape_decl
    | plan_decl
    | run_decl
    | error ';'             { $$ = NULL; }
    | error '}'             { $$ = NULL; }
    ;

name
    : IDENT                 { $$ = (Ident){$1, @1}; }
    ;

idents
    : name                  { $$ = vec_one(ctx->arena, ast_new_ident(ctx->arena, $1)); }
    | idents ',' name       { $$ = vec_push(ctx->arena, $1, ast_new_ident(ctx->arena, $3)); }
    ;

/* Dimension names in brackets; empty for a scalar. */
dimlist
    : %empty                { $$ = (PtrVec){0}; }
    | idents
    ;

/* ---- operators -------------------------------------------------------- */

op_decl
    : OP name '(' tparams ')' ARROW tparam op_body
                            { $$ = ast_new_op(ctx->arena, @$, $2, $4, $7, $8); }
    | OP name '(' tparams ')' ARROW tparam '=' composite_body
                            { $$ = ast_new_composite(ctx->arena, @$, $2, $4, $7, $9); }
    ;

/* A composite's parts: `mu = norm_mean(x);`, instances without `use`. */
composite_body
    : '{' parts '}'         { $$ = $2; }
    | '{' parts error '}'   { $$ = $2; }
    ;

parts
    : %empty                { $$ = (PtrVec){0}; }
    | parts part            { $$ = $2 ? vec_push(ctx->arena, $1, $2) : $1; }
    ;

part
    : name '=' name '(' args ')' ';'
                            { $$ = ast_new_instance_item(ctx->arena, @$, $1, $3, $5, NULL); }
    | error ';'             { $$ = NULL; }
    ;

tparams
    : tparam                { $$ = vec_one(ctx->arena, $1); }
    | tparams ',' tparam    { $$ = vec_push(ctx->arena, $1, $3); }
    ;

tparam
    : name '[' dimlist ']'  { $$ = ast_new_tensor_param(ctx->arena, @$, $1, $3); }
    ;

op_body
    : '{' stmts '}'         { $$ = $2; }
    | '{' stmts error '}'   { $$ = $2; }
    ;

stmts
    : %empty                { $$ = (PtrVec){0}; }
    | stmts stmt            { $$ = $2 ? vec_push(ctx->arena, $1, $2) : $1; }
    ;

stmt
    : name assign_op expr ';'
                            { $$ = ast_new_stmt(ctx->arena, @$, $2, $1, 0, (PtrVec){0}, $3); }
    | name '[' dimlist ']' assign_op expr ';'
                            { $$ = ast_new_stmt(ctx->arena, @$, $5, $1, 1, $3, $6); }
    | GRAD name '=' expr ';'
                            { $$ = ast_new_stmt(ctx->arena, @$, STMT_GRAD, $2, 0, (PtrVec){0}, $4); }
    | error ';'             { $$ = NULL; }
    ;

assign_op
    : PLUS_EQ               { $$ = STMT_ACCUM; }
    | MAX_EQ                { $$ = STMT_MAX; }
    | '='                   { $$ = STMT_ASSIGN; }
    ;

/* ---- expressions (op bodies, DSIs, sizes) ----------------------------- */

expr
    : expr '^' expr         { $$ = ast_new_binary(ctx->arena, @$, '^', $1, $3); }
    | expr '+' expr         { $$ = ast_new_binary(ctx->arena, @$, '+', $1, $3); }
    | expr '-' expr         { $$ = ast_new_binary(ctx->arena, @$, '-', $1, $3); }
    | expr '*' expr         { $$ = ast_new_binary(ctx->arena, @$, '*', $1, $3); }
    | expr '/' expr         { $$ = ast_new_binary(ctx->arena, @$, '/', $1, $3); }
    | expr '%' expr         { $$ = ast_new_binary(ctx->arena, @$, '%', $1, $3); }
    | '-' expr %prec NEG    { $$ = ast_new_neg(ctx->arena, @$, $2); }
    | primary
    ;

primary
    : INT                   { $$ = ast_new_int(ctx->arena, @1, $1); }
    | name                  { $$ = ast_new_name(ctx->arena, $1); }
    | name '[' dimlist ']'  { $$ = ast_new_index(ctx->arena, @$, $1, $3); }
    | name '(' exprs ')'    { $$ = ast_new_call(ctx->arena, @$, $1, $3); }
    | '(' expr ')'          { $$ = $2; }
    | '(' radix ')'         { $$ = ast_new_radix(ctx->arena, @$, $2); }
    ;

exprs
    : expr                  { $$ = vec_one(ctx->arena, $1); }
    | exprs ',' expr        { $$ = vec_push(ctx->arena, $1, $3); }
    ;

/* Mixed radix (a, b, ...): at least two parts. */
radix
    : expr ',' expr         { $$ = vec_push(ctx->arena, vec_one(ctx->arena, $1), $3); }
    | radix ',' expr        { $$ = vec_push(ctx->arena, $1, $3); }
    ;

/* ---- partitions ------------------------------------------------------- */

/* `of A, B, C`: one partition for each operator named; no `of`: one for
 * every operator with the dimensions its DSIs name (a partition by role). */
partition_decl
    : PARTITION name OF idents ON MESH '(' axes ')' steps partition_body
                            { $$ = ast_new_partition(ctx->arena, @$, $2, $4, $8, $10, $11); }
    | PARTITION name ON MESH '(' axes ')' steps partition_body
                            { $$ = ast_new_partition(ctx->arena, @$, $2, (PtrVec){0}, $6, $8, $9); }
    ;

axes
    : axis                  { $$ = vec_one(ctx->arena, $1); }
    | axes ',' axis         { $$ = vec_push(ctx->arena, $1, $3); }
    ;

axis
    : name ':' expr         { $$ = ast_new_axis(ctx->arena, @$, $1, $3); }
    ;

steps
    : %empty                { $$ = NULL; }
    | STEPS '(' axis ')'    { $$ = $3; }
    ;

partition_body
    : '{' dsis '}'          { $$ = $2; }
    | '{' dsis error '}'    { $$ = $2; }
    ;

dsis
    : %empty                { $$ = (PtrVec){0}; }
    | dsis dsi              { $$ = $2 ? vec_push(ctx->arena, $1, $2) : $1; }
    ;

dsi
    : name '=' expr ';'     { $$ = ast_new_dsi(ctx->arena, @$, $1, $3); }
    | error ';'             { $$ = NULL; }
    ;

/* ---- shapes, plans and runs -------------------------------------------- */

shape_decl
    : SHAPE name OF name '{' shape_params '}'
                            { $$ = ast_new_shape_decl(ctx->arena, ast_new_shape(ctx->arena, @$, $2, $4, $6)); }
    | SHAPE name OF name '{' shape_params error '}'
                            { $$ = ast_new_shape_decl(ctx->arena, ast_new_shape(ctx->arena, @$, $2, $4, $6)); }
    ;

shape_params
    : %empty                { $$ = (PtrVec){0}; }
    | shape_params PARAM params ';'
                            { $$ = vec_append(ctx->arena, $1, $3); }
    ;

plan_decl
    : PLAN name OF name ON MESH '(' axes ')' '{' plan_rules '}'
                            { $$ = ast_new_plan_decl(ctx->arena, ast_new_plan(ctx->arena, @$, $2, $4, (Ident){0}, 1, span_join(@6, @9), $8, $11)); }
    | PLAN name EXTENDS name '{' plan_rules '}'
                            { $$ = ast_new_plan_decl(ctx->arena, ast_new_plan(ctx->arena, @$, $2, (Ident){0}, $4, 0, @4, (PtrVec){0}, $6)); }
    | PLAN name EXTENDS name ON MESH '(' axes ')' '{' plan_rules '}'
                            { $$ = ast_new_plan_decl(ctx->arena, ast_new_plan(ctx->arena, @$, $2, (Ident){0}, $4, 1, span_join(@6, @9), $8, $11)); }
    ;

plan_rules
    : %empty                { $$ = (PtrVec){0}; }
    | plan_rules plan_rule  { $$ = $2 ? vec_push(ctx->arena, $1, $2) : $1; }
    ;

plan_rule
    : DEFAULT plan_use ';'  { $$ = ast_new_plan_rule(ctx->arena, @$, 1, (PtrVec){0}, $2); }
    | plan_targets plan_use ';'
                            { $$ = ast_new_plan_rule(ctx->arena, @$, 0, $1, $2); }
    | name name ';'         { $$ = stages_word(ctx, &$1) ? ast_new_plan_stages(ctx->arena, @$, $2) : NULL; }
    | name name ':' expr ';'
                            { $$ = micro_word(ctx, &$1) ? ast_new_plan_micro(ctx->arena, @$, $2, $4, MICRO_GPIPE) : NULL; }
    | name name ':' expr name name ';'
                            { int o = micro_word(ctx, &$1) ? micro_order(ctx, &$5, &$6) : -1;
                              $$ = o < 0 ? NULL : ast_new_plan_micro(ctx->arena, @$, $2, $4, o); }
    | name name ':' expr name ';'
                            { $$ = micro_word(ctx, &$1) && micro_recompute(ctx, &$5, 1)
                                  ? ast_new_plan_micro(ctx->arena, @$, $2, $4, MICRO_GPIPE) : NULL;
                              if ($$)
                                  ast_set_micro_recompute($$->micro, $5.span); }
    | name name ':' expr name name name ';'
                            { int o = micro_word(ctx, &$1) ? micro_order(ctx, &$5, &$6) : -1;
                              $$ = o < 0 || !micro_recompute(ctx, &$7, 0) ? NULL
                                  : ast_new_plan_micro(ctx->arena, @$, $2, $4, o);
                              if ($$)
                                  ast_set_micro_recompute($$->micro, $7.span); }
    | error ';'             { $$ = NULL; }
    ;

plan_targets
    : plan_target           { $$ = vec_one(ctx->arena, $1); }
    | plan_targets ',' plan_target
                            { $$ = vec_push(ctx->arena, $1, $3); }
    ;

plan_target
    : name                  { $$ = ast_new_plan_target(ctx->arena, @$, $1, $1, 0); }
    | name DOTDOT name      { $$ = ast_new_plan_target(ctx->arena, @$, $1, $3, 1); }
    ;

plan_use
    : USE name              { $$ = ast_new_use(ctx->arena, @$, $2, (PtrVec){0}); }
    | USE name '(' bindings ')'
                            { $$ = ast_new_use(ctx->arena, @$, $2, $4); }
    ;

run_decl
    : RUN name '=' name run_args ';'
                            { $$ = ast_new_run_decl(ctx->arena, ast_new_run(ctx->arena, @$, $2, $4, $5, (Ident){0}, (PtrVec){0})); }
    | RUN name '=' name run_args ON name run_args ';'
                            { $$ = ast_new_run_decl(ctx->arena, ast_new_run(ctx->arena, @$, $2, $4, $5, $7, $8)); }
    ;

run_args
    : %empty                { $$ = (PtrVec){0}; }
    | '(' params ')'        { $$ = $2; }
    ;

/* ---- models ----------------------------------------------------------- */

model_decl
    : MODEL name model_body { $$ = ast_new_model(ctx->arena, @$, $2, $3); }
    ;

model_body
    : '{' mitems '}'        { $$ = $2; }
    | '{' mitems error '}'  { $$ = $2; }
    ;

mitems
    : %empty                { $$ = (PtrVec){0}; }
    | mitems mitem          { $$ = $2 ? vec_push(ctx->arena, $1, $2) : $1; }
    | mitems PARAM params ';'
                            { $$ = vec_append(ctx->arena, $1, $3); }
    ;

/* param a = 1, b = 2;  gives one item per name. */
params
    : param                 { $$ = vec_one(ctx->arena, $1); }
    | params ',' param      { $$ = vec_push(ctx->arena, $1, $3); }
    ;

param
    : name '=' expr         { $$ = ast_new_param_item(ctx->arena, @$, $1, $3); }
    ;

/* `from "NAME"` or `from "NAME" transposed` after an input or weight;
 * `from` and `transposed` are words here, not keywords. */
source
    : %empty                { $$ = (TensorSource){0}; }
    | name STRING           { $$ = tensor_source(ctx, $1, $2, @2, NULL); }
    | name STRING name      { $$ = tensor_source(ctx, $1, $2, @2, &$3); }
    ;

mitem
    : MESH '(' axes ')' ';' { $$ = ast_new_mesh_item(ctx->arena, @$, $3); }
    | INPUT name '[' dimexprs ']' source ';'
                            { $$ = ast_set_tensor_source(
                                  ast_new_tensor_item(ctx->arena, @$, MITEM_INPUT, $2, $4), &$6); }
    | WEIGHT name '[' dimexprs ']' source ';'
                            { $$ = ast_set_tensor_source(
                                  ast_new_tensor_item(ctx->arena, @$, MITEM_WEIGHT, $2, $4), &$6); }
    | name '=' name '(' args ')' use ';'
                            { $$ = ast_new_instance_item(ctx->arena, @$, $1, $3, $5, $7); }
    | STRICT ';'            { $$ = ast_new_strict_item(ctx->arena, @$); }
    | name name ';'         { $$ = stages_word(ctx, &$1) ? ast_new_stages_item(ctx->arena, @$, $2) : NULL; }
    | name name ':' expr ';'
                            { $$ = micro_word(ctx, &$1) ? ast_new_micro_item(ctx->arena, @$, $2, $4, MICRO_GPIPE) : NULL; }
    | name name ':' expr name name ';'
                            { int o = micro_word(ctx, &$1) ? micro_order(ctx, &$5, &$6) : -1;
                              $$ = o < 0 ? NULL : ast_new_micro_item(ctx->arena, @$, $2, $4, o); }
    | name name ':' expr name ';'
                            { $$ = micro_word(ctx, &$1) && micro_recompute(ctx, &$5, 1)
                                  ? ast_set_micro_recompute(
                                      ast_new_micro_item(ctx->arena, @$, $2, $4, MICRO_GPIPE), $5.span)
                                  : NULL; }
    | name name ':' expr name name name ';'
                            { int o = micro_word(ctx, &$1) ? micro_order(ctx, &$5, &$6) : -1;
                              $$ = o < 0 || !micro_recompute(ctx, &$7, 0) ? NULL
                                  : ast_set_micro_recompute(
                                      ast_new_micro_item(ctx->arena, @$, $2, $4, o), $7.span); }
    | LAYER '(' name ARROW name ')' REPEAT expr model_body
                            { $$ = ast_new_layer_item(ctx->arena, @$, $3, $5, $8, $9); }
    | error ';'             { $$ = NULL; }
    ;

dimexprs
    : %empty                { $$ = (PtrVec){0}; }
    | dims
    ;

dims
    : dimexpr               { $$ = vec_one(ctx->arena, $1); }
    | dims ',' dimexpr      { $$ = vec_push(ctx->arena, $1, $3); }
    ;

dimexpr
    : name                  { $$ = ast_new_name(ctx->arena, $1); }
    | INT                   { $$ = ast_new_int(ctx->arena, @1, $1); }
    ;

args
    : %empty                { $$ = (PtrVec){0}; }
    | idents
    ;

use
    : %empty                { $$ = NULL; }
    | USE name              { $$ = ast_new_use(ctx->arena, @$, $2, (PtrVec){0}); }
    | USE name '(' bindings ')'
                            { $$ = ast_new_use(ctx->arena, @$, $2, $4); }
    ;

bindings
    : binding               { $$ = vec_one(ctx->arena, $1); }
    | bindings ',' binding  { $$ = vec_push(ctx->arena, $1, $3); }
    ;

binding
    : name ':' name         { $$ = ast_new_binding(ctx->arena, @$, $1, $3); }
    | name '=' name         { $$ = ast_new_rename(ctx->arena, @$, $1, $3); }
    ;

%%

/* `stages AXIS;`: the word is checked here, so that it stays usable as a
 * name everywhere else. */
static int stages_word(ParseCtx *ctx, const Ident *word) {
    if (strcmp(word->name, "stages") == 0)
        return 1;
    diag_error(ctx->sink, word->span, "unexpected '%s': the only clause of two names is 'stages AXIS;'",
               word->name);
    return 0;
}

/* `microbatches PARAM: COUNT;`: the word is checked here too. */
static int micro_word(ParseCtx *ctx, const Ident *word) {
    if (strcmp(word->name, "microbatches") == 0)
        return 1;
    diag_error(ctx->sink, word->span,
               "unexpected '%s': the only clause 'NAME PARAM: COUNT;' is 'microbatches PARAM: COUNT;'",
               word->name);
    return 0;
}

/* `microbatches PARAM: COUNT order ORDER;`: the order of the phases of the
 * micro-batches, MICRO_GPIPE or MICRO_1F1B; -1 after reporting. */
static int micro_order(ParseCtx *ctx, const Ident *word, const Ident *value) {
    if (strcmp(word->name, "order") != 0) {
        diag_error(ctx->sink, word->span,
                   "unexpected '%s': after the micro-batch count comes 'order gpipe' or 'order 1f1b'",
                   word->name);
        return -1;
    }
    if (strcmp(value->name, "gpipe") == 0)
        return MICRO_GPIPE;
    if (strcmp(value->name, "1f1b") == 0)
        return MICRO_1F1B;
    diag_error(ctx->sink, value->span,
               "unknown micro-batch order '%s': the orders are 'gpipe' (every forward, then every "
               "backward) and '1f1b'",
               value->name);
    return -1;
}

/* `microbatches PARAM: COUNT [order ORDER] recompute;`: the last word
 * must be `recompute` (after_count: it follows the count, where `order`
 * could have come too); 0 after reporting. */
static int micro_recompute(ParseCtx *ctx, const Ident *word, int after_count) {
    if (strcmp(word->name, "recompute") == 0)
        return 1;
    diag_error(ctx->sink, word->span,
               after_count ? "unexpected '%s': after the micro-batch count comes 'order gpipe', "
                             "'order 1f1b' or 'recompute'"
                           : "unexpected '%s': after the micro-batch order comes 'recompute' or ';'",
               word->name);
    return 0;
}

/* `from "NAME" [transposed]`: the words are checked here, so that they
 * stay usable as names everywhere else. */
static TensorSource tensor_source(ParseCtx *ctx, Ident from, const char *name, Span span,
                                  const Ident *transposed) {
    TensorSource src = {name, span, 0};
    if (strcmp(from.name, "from") != 0) {
        diag_error(ctx->sink, from.span,
                   "expected 'from \"NAME\"' or ';' after the tensor's dimensions, not '%s'",
                   from.name);
        src.name = NULL;
    }
    if (transposed) {
        if (strcmp(transposed->name, "transposed") == 0)
            src.transposed = 1;
        else
            diag_error(ctx->sink, transposed->span, "expected 'transposed' or ';', not '%s'",
                       transposed->name);
    }
    return src;
}

static PtrVec vec_one(Arena *arena, void *item) {
    PtrVec vec = {0};
    ptrvec_push(arena, &vec, item);
    return vec;
}

static PtrVec vec_push(Arena *arena, PtrVec vec, void *item) {
    ptrvec_push(arena, &vec, item);
    return vec;
}

static PtrVec vec_append(Arena *arena, PtrVec vec, PtrVec more) {
    for (int i = 0; i < more.count; i++)
        ptrvec_push(arena, &vec, more.items[i]);
    return vec;
}

/* Bison calls yyerror only when its stack overflows (custom error
 * reporting handles syntax errors), i.e. for absurdly deep nesting. */
static void yyerror(Span *loc, ParseCtx *ctx, const char *msg) {
    (void)msg; /* "memory exhausted" */
    diag_error(ctx->sink, *loc, "expression nested too deeply");
}

/* Groups of expected tokens reported by one phrase when all are expected. */
typedef struct TokenGroup {
    const char *phrase;
    int nmembers;
    yysymbol_kind_t members[8];
} TokenGroup;

static int kind_in(yysymbol_kind_t kind, const yysymbol_kind_t *set, int n) {
    for (int i = 0; i < n; i++)
        if (set[i] == kind)
            return 1;
    return 0;
}

static int is_keyword(yysymbol_kind_t kind) {
    return kind >= YYSYMBOL_OP && kind <= YYSYMBOL_IMPORT;
}

static int line_of(const ParseCtx *ctx, uint32_t offset) {
    int line, col;
    source_line_col(ctx->src, offset, &line, &col);
    return line;
}

/* Appends printf output to buf (size cap), truncating silently. */
static void buf_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void buf_add(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    if (*len >= cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n < cap - *len ? (size_t)n : cap - *len - 1;
}

static int yyreport_syntax_error(const yypcontext_t *yyctx, ParseCtx *ctx) {
    yysymbol_kind_t unexpected = yypcontext_token(yyctx);
    Span where = *yypcontext_location(yyctx);
    if (unexpected == YYSYMBOL_YYEMPTY) { /* not expected with LAC; be safe */
        diag_error(ctx->sink, where, "syntax error");
        return 0;
    }
    yysymbol_kind_t expected[YYNTOKENS];
    int n = yypcontext_expected_tokens(yyctx, expected, YYNTOKENS);
    if (n < 0)
        return n;

    char msg[512];
    size_t len = 0;
    buf_add(msg, sizeof msg, &len, "unexpected %s", yysymbol_name(unexpected));
    if ((unexpected == YYSYMBOL_IDENT || unexpected == YYSYMBOL_INT) && where.hi - where.lo <= 40)
        buf_add(msg, sizeof msg, &len, " '%.*s'", (int)(where.hi - where.lo),
                (const char *)ctx->base + where.lo);

    /* Complete groups are named by one phrase, after the single tokens;
     * like Bison, list the alternatives only when there are at most four. */
    const TokenGroup groups[] = {
        {"an operator", 6,
         {YYTRANSLATE('+'), YYTRANSLATE('-'), YYTRANSLATE('*'), YYTRANSLATE('/'),
          YYTRANSLATE('%'), YYTRANSLATE('^')}},
        {"a declaration", 8,
         {YYSYMBOL_OP, YYSYMBOL_PARTITION, YYSYMBOL_MODEL, YYSYMBOL_SHAPE, YYSYMBOL_PLAN,
          YYSYMBOL_RUN, YYSYMBOL_IMPORT, YYSYMBOL_YYEOF}},
        {"a model item", 7,
         {YYSYMBOL_PARAM, YYSYMBOL_MESH, YYSYMBOL_INPUT, YYSYMBOL_WEIGHT, YYSYMBOL_STRICT,
          YYSYMBOL_LAYER, YYSYMBOL_IDENT}},
    };
    enum { NGROUPS = sizeof groups / sizeof groups[0] };
    int group_on[NGROUPS];
    for (int g = 0; g < NGROUPS; g++) {
        group_on[g] = 1;
        for (int m = 0; m < groups[g].nmembers; m++)
            if (!kind_in(groups[g].members[m], expected, n))
                group_on[g] = 0;
    }
    const char *alts[YYNTOKENS + NGROUPS];
    int nalts = 0;
    for (int i = 0; i < n; i++) {
        int grouped = 0;
        for (int g = 0; g < NGROUPS; g++)
            if (group_on[g] && kind_in(expected[i], groups[g].members, groups[g].nmembers))
                grouped = 1;
        if (!grouped)
            alts[nalts++] = yysymbol_name(expected[i]);
    }
    for (int g = 0; g < NGROUPS; g++)
        if (group_on[g])
            alts[nalts++] = groups[g].phrase;
    if (nalts <= 4)
        for (int i = 0; i < nalts; i++)
            buf_add(msg, sizeof msg, &len, "%s%s", i ? " or " : ", expecting ", alts[i]);
    diag_error(ctx->sink, where, "%s", msg);

    /* Hints. */
    int want_semi = kind_in(YYTRANSLATE(';'), expected, n);
    if (want_semi && ctx->ntokens > 1 && ctx->prev_hi != where.lo &&
        (unexpected == YYSYMBOL_YYEOF || unexpected == YYTRANSLATE('}') ||
         line_of(ctx, where.lo) > line_of(ctx, ctx->prev_hi))) {
        Span at = {ctx->file, ctx->prev_hi, ctx->prev_hi};
        diag_note(ctx->sink, at, "is a ';' missing here?");
    }
    if (unexpected == YYSYMBOL_YYEOF && kind_in(YYTRANSLATE('}'), expected, n) &&
        ctx->brace_depth > 0 && ctx->brace_depth <= (int)(sizeof ctx->braces / sizeof ctx->braces[0])) {
        uint32_t open = ctx->braces[ctx->brace_depth - 1];
        Span at = {ctx->file, open, open + 1};
        diag_note(ctx->sink, at, "to match this '{'");
    }
    /* Only where nothing but a name can come, e.g. `op steps(...)`. */
    if (is_keyword(unexpected) && n == 1 && expected[0] == YYSYMBOL_IDENT)
        diag_note_plain(ctx->sink, "%s is a keyword and cannot be used as a name",
                        yysymbol_name(unexpected));
    return 0;
}
