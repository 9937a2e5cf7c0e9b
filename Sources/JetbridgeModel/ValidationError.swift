/// A domain rule that a value breaks: what is wrong, where, and what to do about it.
///
/// Every throwing API in this module throws `ValidationError`. Values decoded from records that break a rule inside a
/// strongly typed field (``FlightID``, ``Seat``, ``Owner``, a UUID) surface as a `DecodingError.dataCorrupted` whose
/// `underlyingError` is a `ValidationError`; ``init(_:malformed:)`` recovers it, so a caller can always report
/// one reason with one path.
public struct ValidationError: Error, Codable, Hashable, Sendable, CustomStringConvertible {
    /// What kind of rule was broken; stable, so scripts and acks can switch on it.
    public enum Code: String, Codable, Hashable, Sendable, CaseIterable {
        case fileMissing
        case fileUnreadable
        case malformedPropertyList
        case malformedJSON
        case payloadTooLarge
        case missingField
        case wrongType
        case invalidCurrency
        case emptyMenu
        case invalidItemName
        case duplicateItem
        case negativePrice
        /// A unit price above ``Item/maxUnitPrice``.
        case invalidPrice
        /// More than ``Order/maxLines`` lines in one order.
        case tooManyLines
        case unknownItem
        case invalidCount
        case emptyOrder
        case invalidSeat
        case invalidFlight
        case invalidRevision
        case invalidDevice
        case invalidDate
        case invalidOwner
        case invalidWeight
        case invalidUUID
        case invalidScanPoint
        case invalidRecordType
        case overflow
        case currencyMismatch
        /// A record of an order that another device created (checked by the ground against its store).
        case foreignOrder
    }

    public var code: Code
    /// What is wrong and what to do, in one sentence a person can act on.
    public var message: String
    /// The field, as a coding path such as `lineItems[1].count`; empty when the whole value is at fault.
    public var path: String
    /// The file the value came from, when there is one.
    public var file: String?

    public init(_ code: Code, _ message: String, path: String = "", file: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.file = file
    }

    /// `file: path: message`, leaving out the parts that are absent, with anything non-printable escaped
    /// (``InertText``): messages quote the text at fault, which may come from a device and end up in an ack, a
    /// log line or the devices report.
    public var description: String {
        var parts: [String] = []
        if let file { parts.append(file) }
        if !path.isEmpty { parts.append(path) }
        parts.append(message)
        return InertText.escape(parts.joined(separator: ": "))
    }

    /// Recovers one domain reason from a decoding failure, keeping its coding path.
    ///
    /// - Parameters:
    ///   - error: The error a `Decoder` threw.
    ///   - malformed: The code for a document that does not parse at all (bad JSON, bad property list).
    public init(_ error: DecodingError, malformed: Code = .wrongType) {
        switch error {
        case .dataCorrupted(let context):
            let path = Self.path(context.codingPath)
            if let inner = context.underlyingError as? ValidationError {
                self = inner
                if self.path.isEmpty { self.path = path }
            } else if context.codingPath.isEmpty {
                self.init(malformed, context.debugDescription, path: path)
            } else {
                self.init(.wrongType, "value is not valid: \(context.debugDescription)", path: path)
            }
        case .keyNotFound(let key, let context):
            self.init(
                .missingField, "required field '\(key.stringValue)' is missing",
                path: Self.path(context.codingPath + [key]))
        case .valueNotFound(let type, let context):
            self.init(
                .missingField, "a value of type \(type) is required here but is missing or null",
                path: Self.path(context.codingPath))
        case .typeMismatch(let type, let context):
            self.init(
                .wrongType, "wrong type: \(context.debugDescription) (expected \(Self.typeName(type)))",
                path: Self.path(context.codingPath))
        @unknown default:
            self.init(malformed, String(describing: error))
        }
    }

    /// Renders a coding path as `a.b[2].c`.
    public static func path(_ codingPath: [any CodingKey]) -> String {
        var result = ""
        for key in codingPath {
            if let index = key.intValue, key.stringValue == String(index) || key.stringValue.hasPrefix("Index ") {
                result += "[\(index)]"
            } else {
                result += result.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return result
    }

    /// Wraps this error so that it can be thrown from `init(from:)` as Codable expects.
    /// The full coding path replaces the error's own path, so a field deep in a batch reads `[3].tag.owner`.
    func decodingError(at codingPath: [any CodingKey]) -> DecodingError {
        var error = self
        if !codingPath.isEmpty { error.path = Self.path(codingPath) }
        return .dataCorrupted(.init(codingPath: codingPath, debugDescription: message, underlyingError: error))
    }

    /// Decodes a value that is a checked string (``FlightID``, ``Seat``): one string, passed to `check`, whose
    /// `ValidationError` becomes a `DecodingError` at the decoder's coding path.
    /// - Parameters:
    ///   - decoder: The decoder of the value.
    ///   - check: The value's checking initializer, such as `FlightID.init(_:)`.
    /// - Returns: The checked value.
    /// - Throws: `DecodingError`.
    static func decodeChecked<Value>(_ decoder: any Decoder, _ check: (String) throws -> Value) throws -> Value {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            return try check(text)
        } catch let error as ValidationError {
            throw error.decodingError(at: decoder.codingPath)
        }
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Double.Type, is Float.Type: "a number"
        case is Int.Type: "an integer"
        case is [String: Any].Type: "an object"
        case is [Any].Type: "an array"
        default: String(describing: type)
        }
    }
}

extension DecodingError {
    /// The domain reason for this failure, for callers that report errors to people.
    public var validationError: ValidationError { ValidationError(self) }
}
