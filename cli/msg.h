/* msg.h - the one way the CLI talks to the user on stderr: "gemmaembed: <message>". */
#ifndef GE_CLI_MSG_H
#define GE_CLI_MSG_H

void ge_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
