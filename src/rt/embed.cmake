# embed.cmake: writes the bytes of IN as a C array named NAME (with a NUL
# after them, so a text file is also a string) and NAME_bytes (the length
# without the NUL) into OUT.  cmake -DIN=... -DOUT=... -DNAME=... -P embed.cmake
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from ${IN} by embed.cmake */\n#include <stddef.h>\n"
  "const unsigned char ${NAME}[] __attribute__((aligned(8))) = {\n${body}0x00\n};\n"
  "const size_t ${NAME}_bytes = ${bytes};\n")
