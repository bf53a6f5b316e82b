/**
 * Optional TLS for every listener: the OTLP/HTTP and API ports become HTTPS with the same handlers, and the gRPC
 * port uses SSL server credentials. With a client CA, clients must present a certificate it signed (mutual TLS);
 * bearer tokens still apply on top.
 */
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerOptions as HttpOptions, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer, type ServerOptions as HttpsOptions } from 'node:https';
import { createSecureContext } from 'node:tls';
import * as grpc from '@grpc/grpc-js';

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  /** When given, clients must present a certificate signed by this CA. */
  clientCaFile?: string;
}

/** PEM material read once at start; the files' paths stay out of it (and out of logs). */
export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  clientCa?: Buffer;
}

export class TlsConfigError extends Error {}

function readPem(what: string, file: string): Buffer {
  let pem: Buffer;
  try {
    pem = readFileSync(file);
  } catch (e) {
    throw new TlsConfigError(`${what} ${file}: cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (!pem.includes('-----BEGIN ')) throw new TlsConfigError(`${what} ${file}: not a PEM file`);
  return pem;
}

/** Read and check the certificate, key and optional client CA; a key that does not match the certificate is refused. */
export function loadTlsMaterial(files: TlsFiles): TlsMaterial {
  const material: TlsMaterial = {
    cert: readPem('--tls-cert', files.certFile),
    key: readPem('--tls-key', files.keyFile),
    clientCa: files.clientCaFile === undefined ? undefined : readPem('--tls-client-ca', files.clientCaFile),
  };
  try {
    createSecureContext({ cert: material.cert, key: material.key, ca: material.clientCa });
  } catch (e) {
    throw new TlsConfigError(`TLS: ${files.certFile} / ${files.keyFile}: unusable certificate or key: ${(e as Error).message}`);
  }
  return material;
}

export function httpsOptions(m: TlsMaterial): HttpsOptions {
  return m.clientCa ? { cert: m.cert, key: m.key, ca: m.clientCa, requestCert: true, rejectUnauthorized: true } : { cert: m.cert, key: m.key };
}

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;
export type Listener = HttpServer | HttpsServer;

/** An HTTP server, or an HTTPS one with the same handler when TLS material is given. */
export function createListener(handler: RequestHandler, tls?: TlsMaterial, options: HttpOptions = {}): Listener {
  return tls ? createHttpsServer({ ...options, ...httpsOptions(tls) }, handler) : createHttpServer(options, handler);
}

/** gRPC server credentials: SSL with the same material (client certificates checked when a client CA is given). */
export function grpcServerCredentials(tls?: TlsMaterial): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(tls.clientCa ?? null, [{ private_key: tls.key, cert_chain: tls.cert }], tls.clientCa !== undefined);
}
