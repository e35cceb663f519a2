/* main.c — the `stoker` command: dispatches to one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "common/cli.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *summary;
} cmds[] = {
	{"bench", cmd_bench, "how fast this machine can feed a GPU from PATH, and what holds it back"},
	{"gen", cmd_gen, "generate a synthetic ImageNet-like folder of real JPEGs"},
	{"pack", cmd_pack, "pack a folder dataset into WebDataset-style tar shards"},
	{"transcode", cmd_transcode, "copy a folder with JPEGs rewritten losslessly for crop decoding"},
	{"disk", cmd_disk, "storage benchmark in training's access patterns"},
	{"doctor", cmd_doctor, "system checks for feeding GPUs, each with the command that fixes it"},
	{"iostat", cmd_iostat, "live per-device I/O, the figures of iostat -x"},
	{"exporter", cmd_exporter, "Prometheus /metrics: disks, GPUs and the loaders running here"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: stoker COMMAND [options] [args]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-11s%s\n", cmds[i].name, cmds[i].summary);
	fprintf(f, "\n`stoker COMMAND --help` describes each.  stoker %s\n", stk_version());
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("stoker %s\n", stk_version());
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	const char *names[sizeof(cmds) / sizeof(cmds[0])];
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		names[i] = cmds[i].name;
	const char *near = did_you_mean(argv[1], strlen(argv[1]), names, sizeof(cmds) / sizeof(cmds[0]));
	if (near) {
		fprintf(stderr, "stoker: unknown command '%s'; did you mean 'stoker %s'?\n", argv[1],
			near);
		return EXIT_USAGE;
	}
	fprintf(stderr, "stoker: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
