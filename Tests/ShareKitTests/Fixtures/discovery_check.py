#!/usr/bin/env python3
"""Announces a share device to Syncthing's global discovery server (stdiscosrv) with the device's own certificate,
then looks it up by the ID given, as Syncthing's Global Discovery v3 does. Usage: discovery_check.py PORT CERT KEY ID.
Prints the POST status, then the GET status and body."""
import http.client, json, os, ssl, sys

port, cert, key, device = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE  # the test pins nothing here: it checks what the server accepts
context.load_cert_chain(cert, key)

def request(method, path, body=None):
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context,
                                         timeout=10 * max(1.0, float(os.environ.get("SHARE_TEST_PATIENCE", "1"))))
    headers = {"Content-Type": "application/json"} if body else {}
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    data = response.read().decode("utf-8", "replace").strip()
    connection.close()
    return response.status, data

status, _ = request("POST", "/v2/", json.dumps({"addresses": ["tcp://192.0.2.10:22000"]}))
print("post", status)
status, body = request("GET", "/v2/?device=" + device)
print("get", status, body)
