# Writes OUT, a C file holding every file of FILES as a string, so that
# the standard library is parsed from memory under its own name
# ("<stdlib>/name.prime") and diagnostics inside it point at real lines.
set(body "/* Generated from the stdlib .prime files by cmake/embed_stdlib.cmake. Do not edit. */\n#include \"stdlib_embed.h\"\n\n")
set(table "const StdlibFile stdlib_files[] = {\n")
set(i 0)
foreach(f ${FILES})
  get_filename_component(name ${f} NAME)
  file(READ ${f} hex HEX)
  string(LENGTH "${hex}" hexlen)
  math(EXPR nbytes "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "static const char stdlib_${i}[] = {${bytes}0x00};\n")
  string(APPEND table "    {\"<stdlib>/${name}\", stdlib_${i}, ${nbytes}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND table "};\nconst int stdlib_file_count = ${i};\n")
file(WRITE ${OUT} "${body}\n${table}")
