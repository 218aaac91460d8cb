# embed.cmake: writes the bytes of IN as a C array (tsr__rt_kernel_image)
# into OUT. cmake -DIN=... -DOUT=... -P embed.cmake
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from ${IN} by embed.cmake */\n#include <stddef.h>\n"
  "const unsigned char tsr__rt_kernel_image[] __attribute__((aligned(8))) = {\n${body}\n};\n"
  "const size_t tsr__rt_kernel_image_bytes = ${bytes};\n")
