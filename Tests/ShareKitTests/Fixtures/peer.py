"""What the test peers share: a TLS 1.3 client with a device's certificate, and share's frames."""
import os
import socket
import ssl
import struct

# Every deadline is a quiet machine's figure times the factor the test passes on (Patience in the Swift tests: longer
# under a sanitizer and on a busy machine).
PATIENCE = max(1.0, float(os.environ.get("SHARE_TEST_PATIENCE", "1")))


def connect(port, cert, key, host="127.0.0.1", timeout=30):
    """A TLS 1.3 connection presenting `cert`/`key`, accepting any server certificate (the tests check it). `timeout`
    is a quiet machine's figure: it is scaled by PATIENCE."""
    timeout *= PATIENCE
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(cert, key)
    return ctx.wrap_socket(socket.create_connection((host, port), timeout=timeout))


def send_frame(sock, kind, payload):
    sock.sendall(struct.pack(">BI", kind, len(payload)) + payload)


def receive_frame(sock):
    """The next frame as (type, payload); (None, None) when the stream ends. A timeout is raised."""
    header = b""
    while len(header) < 5:
        try:
            part = sock.recv(5 - len(header))
        except TimeoutError:
            raise
        except (OSError, ssl.SSLError):
            return None, None
        if not part:
            return None, None
        header += part
    kind, length = struct.unpack(">BI", header)
    body = b""
    while len(body) < length:
        part = sock.recv(length - len(body))
        if not part:
            break
        body += part
    return kind, body
