# embed.cmake - a text file as a C string (the viewer's script and style go into the binary at
# build time; nothing is looked up at run time).  cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed.cmake
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE ${OUT} "/* generated from ${IN} by viz/view/embed.cmake */\nconst char ${NAME}[] = {${body} 0};\n")
