"""editors/prime.tmLanguage.json is valid JSON, its regular expressions
compile (as Python regexes, close enough to Oniguruma for these), and the
keywords it highlights are exactly the lexer's (grammar/lexer.re).

usage: grammar.py REPO_DIR
"""
import json
import os
import re
import sys

repo = sys.argv[1]
with open(os.path.join(repo, "editors", "prime.tmLanguage.json")) as f:
    grammar = json.load(f)


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


lexer = open(os.path.join(repo, "grammar", "lexer.re")).read()
keywords = set(re.findall(r'^\s*"([a-z]+)"\s*\{\s*return token\(ctx, lloc, tok, TOK_', lexer, re.M))
if len(keywords) < 10:
    fail("only %d keywords found in lexer.re: %s" % (len(keywords), sorted(keywords)))

if grammar.get("scopeName") != "source.prime" or "prime" not in grammar.get("fileTypes", []):
    fail("scopeName/fileTypes: %r %r" % (grammar.get("scopeName"), grammar.get("fileTypes")))

highlighted = set()
nregex = 0


def walk(node):
    global nregex
    if isinstance(node, dict):
        for key in ("match", "begin", "end"):
            if key in node:
                try:
                    re.compile(node[key])
                except re.error as e:
                    fail("%s %r does not compile: %s" % (key, node[key], e))
                nregex += 1
        if "match" in node and node.get("name", "").startswith(("keyword.", "storage.")):
            m = re.fullmatch(r"\\b\(([a-z|]+)\)\\b", node["match"])
            if m:
                highlighted.update(m.group(1).split("|"))
        for v in node.values():
            walk(v)
    elif isinstance(node, list):
        for v in node:
            walk(v)


walk(grammar)
if highlighted != keywords:
    fail("the grammar highlights %s; the lexer's keywords are %s (missing %s, extra %s)"
         % (sorted(highlighted), sorted(keywords), sorted(keywords - highlighted),
            sorted(highlighted - keywords)))
for ref in re.findall(r'"include": "#([a-z]+)"', json.dumps(grammar)):
    if ref not in grammar["repository"]:
        fail("include of #%s, which the repository lacks" % ref)
print("ok: %d keywords, %d regular expressions" % (len(keywords), nregex))
