/* bench/verdict.c — the last lines of `stoker bench`: the library's verdict
 * (stk_loader_diagnose: which part of the input pipeline holds the run back,
 * the evidence, the change to try, the device behind PATH) as text and JSON. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "common/cli.h"

json_t *verdict_json(const struct stk_verdict *v)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:f,s:f,s:f,s:f}", "kind", v->name, "evidence",
			      v->evidence, "try", v->advice, "window_s", v->window_s, "stall_ratio",
			      v->stall_ratio, "decode_busy", v->decode_busy, "inflight_mean",
			      v->inflight_mean);
	if (v->device_sampled)
		json_object_set_new(j, "device",
				    json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f}", "name", v->device,
					      "r_s", v->dev_r_s, "read_mb_s", v->dev_read_mb_s,
					      "r_await_ms", v->dev_r_await_ms, "aqu_sz",
					      v->dev_aqu_sz, "util", v->dev_util, "share",
					      v->dev_share));
	return j;
}

void device_print(const struct stk_verdict *v)
{
	if (v->device_sampled)
		printf("  device %-19s r/s %.0f, %.1f MB/s, r_await %.2f ms, aqu-sz %.1f, %%util %.0f\n",
		       v->device, v->dev_r_s, v->dev_read_mb_s, v->dev_r_await_ms, v->dev_aqu_sz,
		       v->dev_util);
}

void verdict_print(const struct stk_verdict *v)
{
	printf("\n  verdict: %s: %s.\n  try: %s.\n", v->name, v->evidence, v->advice);
}

