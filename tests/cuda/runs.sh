#!/bin/sh
# runs.sh PRIMEC FILE — the models and runs of FILE that build (one a
# line): the names `primec check FILE` reports as ok.
"$1" check "$2" | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\): ok:.*/\1/p'
