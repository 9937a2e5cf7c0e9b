internal import CZeroMQ

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Z85, ZeroMQ's printable encoding of binary keys (RFC 32): 4 bytes become 5 characters.
public enum Z85 {
    /// Encodes bytes as Z85 text.
    /// - Parameter data: The bytes; the count must be a multiple of 4 (a CURVE key is 32 bytes → 40 characters).
    /// - Returns: The text.
    /// - Throws: `ZeroMQError` with code `invalidArgument` if the count is not a multiple of 4.
    public static func encode(_ data: Data) throws(ZeroMQError) -> String {
        guard data.count % 4 == 0 else {
            throw ZeroMQError(code: .invalidArgument, operation: "Z85 encode \(data.count) bytes (not a multiple of 4)")
        }
        var text = [CChar](repeating: 0, count: data.count * 5 / 4 + 1)
        let bytes = [UInt8](data)
        guard zmq_z85_encode(&text, bytes, bytes.count) != nil else {
            throw ZeroMQError(code: .invalidArgument, operation: "Z85 encode")
        }
        return string(fromNulTerminated: text)
    }

    /// Decodes Z85 text.
    /// - Parameter text: The text; its length must be a multiple of 5.
    /// - Returns: The bytes.
    /// - Throws: `ZeroMQError` with code `invalidArgument` for a bad length or a character outside Z85.
    public static func decode(_ text: String) throws(ZeroMQError) -> Data {
        let utf8 = Array(text.utf8)
        guard utf8.count % 5 == 0, utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw ZeroMQError(code: .invalidArgument, operation: "Z85 decode \(utf8.count) characters")
        }
        var bytes = [UInt8](repeating: 0, count: utf8.count * 4 / 5)
        guard zmq_z85_decode(&bytes, text) != nil else {
            throw ZeroMQError(code: .invalidArgument, operation: "Z85 decode (invalid character)")
        }
        return Data(bytes)
    }
}

extension Z85 {
    /// A CURVE key (public or secret) as its text is written in key files, configurations and flags: exactly 40
    /// characters of Z85 decoding to 32 bytes; nil for anything else. The one check of a key's text.
    public static func curveKey(_ text: String) -> Data? {
        guard text.utf8.count == 40, let key = try? decode(text), key.count == 32 else { return nil }
        return key
    }
}

/// A CURVE long-term key pair (Curve25519), in binary and Z85 form.
public struct CurveKeyPair: Sendable, Hashable {
    /// The public key, 32 bytes: give it to peers (servers put clients' keys in the `ZAPHandler` allowlist).
    public let publicKey: Data
    /// The secret key, 32 bytes: keep it private.
    public let secretKey: Data

    /// Wraps an existing key pair.
    /// - Parameters:
    ///   - publicKey: 32 bytes.
    ///   - secretKey: 32 bytes.
    /// - Throws: `ZeroMQError` with code `invalidArgument` unless both are 32 bytes.
    public init(publicKey: Data, secretKey: Data) throws(ZeroMQError) {
        guard publicKey.count == 32, secretKey.count == 32 else {
            throw ZeroMQError(code: .invalidArgument, operation: "CURVE keys must be 32 bytes")
        }
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// Wraps an existing key pair given as Z85 text.
    /// - Parameters:
    ///   - publicKeyZ85: 40 characters.
    ///   - secretKeyZ85: 40 characters.
    /// - Throws: `ZeroMQError` with code `invalidArgument` for malformed keys.
    public init(publicKeyZ85: String, secretKeyZ85: String) throws(ZeroMQError) {
        try self.init(publicKey: Z85.decode(publicKeyZ85), secretKey: Z85.decode(secretKeyZ85))
    }

    /// Generates a new random key pair (`zmq_curve_keypair`).
    /// - Returns: The pair.
    /// - Throws: `ZeroMQError` if libzmq was built without CURVE.
    public static func generate() throws(ZeroMQError) -> CurveKeyPair {
        var publicText = [CChar](repeating: 0, count: 41)
        var secretText = [CChar](repeating: 0, count: 41)
        try zmqCall("generate CURVE key pair") { zmq_curve_keypair(&publicText, &secretText) }
        return try CurveKeyPair(
            publicKeyZ85: string(fromNulTerminated: publicText), secretKeyZ85: string(fromNulTerminated: secretText))
    }

    /// The public key as 40 characters of Z85.
    public var publicKeyZ85: String { (try? Z85.encode(publicKey)) ?? "" }
    /// The secret key as 40 characters of Z85.
    public var secretKeyZ85: String { (try? Z85.encode(secretKey)) ?? "" }
}

extension Socket {
    /// Makes this socket a CURVE server with the given key pair (`curveServer`, `curveSecretKey`).
    ///
    /// Without a `ZAPHandler` on the same context, any client that knows the public key is admitted.
    /// - Parameter keys: The server's key pair.
    /// - Throws: `ZeroMQError`.
    public func makeCurveServer(keys: CurveKeyPair) throws(ZeroMQError) {
        try set(.curveServer, true)
        try set(.curveSecretKey, keys.secretKey)
    }

    /// Makes this socket a CURVE client that authenticates as `keys` and trusts only `serverPublicKey`.
    /// - Parameters:
    ///   - keys: The client's key pair.
    ///   - serverPublicKey: The server's public key, 32 bytes.
    /// - Throws: `ZeroMQError`.
    public func makeCurveClient(keys: CurveKeyPair, serverPublicKey: Data) throws(ZeroMQError) {
        try set(.curvePublicKey, keys.publicKey)
        try set(.curveSecretKey, keys.secretKey)
        try set(.curveServerKey, serverPublicKey)
    }
}

/// Decodes a NUL-terminated C character buffer as UTF-8.
func string(fromNulTerminated buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
