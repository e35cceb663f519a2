/* metrics/metrics_int.h — what tests reach inside metrics/serve.c.  Never installed. */
#ifndef STK_METRICS_INT_H
#define STK_METRICS_INT_H

#include <sys/socket.h>

/* Parses a listen string (see stk_metrics_serve) into an address.  *wild is
 * set for ":PORT" (every interface: IPv6 any, dual-stack).  0 or -EINVAL. */
int stk__listen_parse(const char *listen, struct sockaddr_storage *ss, socklen_t *sl, int *wild);

#endif
