/*
 * printer.h — the buffered text printer shared by the emitters: printf
 * into a growing buffer with an indentation level applied at the start
 * of each line.
 */
#ifndef PRIMEC_PRINTER_H
#define PRIMEC_PRINTER_H

#include <stddef.h>
#include <stdio.h>

typedef struct Printer {
    char *data;
    size_t len;
    size_t cap;
    int indent; /* levels of 4 spaces */
    int at_line_start;
} Printer;

void printer_init(Printer *p);
void printer_free(Printer *p);
/* Appends formatted text; indentation is inserted after each newline. */
void printer_printf(Printer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void printer_indent(Printer *p, int delta);
/* Takes the buffer (NUL-terminated); the printer is reset. */
char *printer_take(Printer *p, size_t *len);

#endif
