/*
 * io/rcred.c — who asks, and whom TLS trusts, for io/remote.c's create.
 *
 * Credentials are looked up the way the AWS CLI does: AWS_ACCESS_KEY_ID /
 * AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN) in the environment, then the
 * profile (AWS_PROFILE, else "default") of ~/.aws/credentials
 * (AWS_SHARED_CREDENTIALS_FILE) and ~/.aws/config (AWS_CONFIG_FILE), which
 * may also hold region and endpoint_url; none found (or
 * AWS_NO_SIGN_REQUEST=true): anonymous requests, for public buckets.  Where
 * they came from is kept for error messages; the secret never leaves this
 * struct (no message, log or metric has it; the key id is shown masked).
 *
 * TLS is always verified.  The certificates trusted are the system's, or
 * those named the way curl's and the AWS CLI's users name them:
 * AWS_CA_BUNDLE (s3:// only), CURL_CA_BUNDLE or SSL_CERT_FILE (a file),
 * SSL_CERT_DIR (a folder); libcurl itself reads none of these.  An untrusted
 * certificate fails the request, naming the URL and where the CAs came from.
 */
#include "io/remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Looks up key in [section] of an INI file (~/.aws/credentials, config). */
static bool ini_get(const char *path, const char *section, const char *key, char *out,
		    size_t outlen)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	char line[2048];
	bool in = false, found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		stk__trim(line);
		if (line[0] == '[') {
			char *end = strchr(line, ']');
			if (end)
				*end = 0;
			char *name = line + 1;
			stk__trim(name);
			in = !strcmp(name, section);
			continue;
		}
		char *eq = strchr(line, '=');
		if (!in || !eq || line[0] == '#' || line[0] == ';')
			continue;
		*eq = 0;
		char *k = line, *v = eq + 1;
		stk__trim(k);
		stk__trim(v);
		if (!strcmp(k, key)) {
			snprintf(out, outlen, "%s", v);
			found = true;
		}
	}
	fclose(f);
	return found;
}

static void aws_file(char *out, size_t len, const char *env, const char *name)
{
	const char *v = getenv(env), *home = getenv("HOME");
	if (v && *v)
		snprintf(out, len, "%s", v);
	else
		snprintf(out, len, "%s/.aws/%s", home && *home ? home : "/root", name);
}

static void mask(const char *key, char *out, size_t len)
{
	size_t l = strlen(key);
	snprintf(out, len, "****%s", l > 4 ? key + l - 4 : "");
}

/* The key pair (and session token) of [section] in file, the profile's
 * name for messages: whether both keys are there. */
static bool profile_keys(struct stk__remote *r, const char *file, const char *section,
			 const char *profile, char *tok, size_t toklen)
{
	char m[16];
	if (!ini_get(file, section, "aws_access_key_id", r->access_key, sizeof(r->access_key)) ||
	    !ini_get(file, section, "aws_secret_access_key", r->secret_key, sizeof(r->secret_key)))
		return false;
	ini_get(file, section, "aws_session_token", tok, toklen);
	mask(r->access_key, m, sizeof(m));
	snprintf(r->cred_source, sizeof(r->cred_source), "profile '%s' of %s (key %s)", profile,
		 file, m);
	return true;
}

void stk__remote_find_credentials(struct stk__remote *r)
{
	const char *nosign = getenv("AWS_NO_SIGN_REQUEST");
	const char *profile = getenv("AWS_PROFILE");
	char creds[1024], config[1024], csec[300], tok[4096] = "", m[16];
	if (!profile || !*profile)
		profile = "default";
	aws_file(creds, sizeof(creds), "AWS_SHARED_CREDENTIALS_FILE", "credentials");
	aws_file(config, sizeof(config), "AWS_CONFIG_FILE", "config");
	/* config names profiles "[profile NAME]", except the default one */
	if (!strcmp(profile, "default"))
		snprintf(csec, sizeof(csec), "default");
	else
		snprintf(csec, sizeof(csec), "profile %s", profile);

	const char *reg = getenv("AWS_REGION");
	if (!reg || !*reg)
		reg = getenv("AWS_DEFAULT_REGION");
	if (reg && *reg)
		snprintf(r->region, sizeof(r->region), "%s", reg);
	else if (!ini_get(config, csec, "region", r->region, sizeof(r->region)))
		snprintf(r->region, sizeof(r->region), "us-east-1");
	const char *ep = getenv("AWS_ENDPOINT_URL_S3");
	if (!ep || !*ep)
		ep = getenv("AWS_ENDPOINT_URL");
	if (ep && *ep)
		snprintf(r->endpoint, sizeof(r->endpoint), "%s", ep);
	else
		ini_get(config, csec, "endpoint_url", r->endpoint, sizeof(r->endpoint));
	size_t el = strlen(r->endpoint);
	while (el && r->endpoint[el - 1] == '/')
		r->endpoint[--el] = 0;

	if (nosign && (!strcasecmp(nosign, "true") || !strcmp(nosign, "1"))) {
		r->anonymous = true;
		snprintf(r->cred_source, sizeof(r->cred_source),
			 "anonymous (AWS_NO_SIGN_REQUEST is set)");
		return;
	}
	const char *id = getenv("AWS_ACCESS_KEY_ID"), *sec = getenv("AWS_SECRET_ACCESS_KEY");
	if (id && *id && sec && *sec) {
		snprintf(r->access_key, sizeof(r->access_key), "%s", id);
		snprintf(r->secret_key, sizeof(r->secret_key), "%s", sec);
		const char *t = getenv("AWS_SESSION_TOKEN");
		if (t && *t)
			snprintf(tok, sizeof(tok), "%s", t);
		mask(id, m, sizeof(m));
		snprintf(r->cred_source, sizeof(r->cred_source),
			 "environment (AWS_ACCESS_KEY_ID %s)", m);
	} else if (!profile_keys(r, creds, profile, profile, tok, sizeof(tok)) &&
		   !profile_keys(r, config, csec, profile, tok, sizeof(tok))) {
		r->access_key[0] = r->secret_key[0] = 0;
		r->anonymous = true;
		snprintf(r->cred_source, sizeof(r->cred_source),
			 "anonymous (no AWS_ACCESS_KEY_ID, no profile '%s' in %s)", profile, creds);
	}
	if (tok[0])
		r->session_token = strdup(tok);
}

int stk__remote_find_ca(struct stk__remote *r, const char *url, char *err, size_t errlen)
{
	const char *files[] = {r->s3 ? "AWS_CA_BUNDLE" : NULL, "CURL_CA_BUNDLE", "SSL_CERT_FILE"};
	snprintf(r->ca_source, sizeof(r->ca_source), "the system's CA certificates");
	for (size_t i = 0; i < STK_ARRAY_SIZE(files); i++) {
		const char *v = files[i] ? getenv(files[i]) : NULL;
		if (!v || !*v)
			continue;
		if (access(v, R_OK))
			return stk__errf(err, errlen, -errno, "%s: %s=%s: cannot read the CA certificates: %s",
					 url, files[i], v, strerror(errno));
		snprintf(r->ca_file, sizeof(r->ca_file), "%s", v);
		snprintf(r->ca_source, sizeof(r->ca_source), "CA certificates from %s=%s", files[i], v);
		break;
	}
	const char *d = getenv("SSL_CERT_DIR");
	if (d && *d) {
		if (access(d, R_OK | X_OK))
			return stk__errf(err, errlen, -errno, "%s: SSL_CERT_DIR=%s: cannot read the CA "
					 "certificates: %s", url, d, strerror(errno));
		snprintf(r->ca_dir, sizeof(r->ca_dir), "%s", d);
		if (!r->ca_file[0])
			snprintf(r->ca_source, sizeof(r->ca_source), "CA certificates from "
				 "SSL_CERT_DIR=%s", d);
	}
	return 0;
}
