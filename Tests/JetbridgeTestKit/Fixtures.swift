public import Foundation

/// Test record ids that read as their number (`…-000000000042`), version-4 shaped so every validator accepts them.
/// - Parameter n: The number, 0 to 999,999,999,999.
/// - Returns: The UUID.
public func uuid(_ n: Int) -> UUID {
    UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", n))!
}

/// A test time `seconds` after 1,795,200,000 s since 1970 (2026-11-20 18:40 UTC), so dates in failures read alike.
/// - Parameter seconds: The offset.
/// - Returns: The date.
public func date(_ seconds: Double) -> Date { Date(timeIntervalSince1970: 1_795_200_000 + seconds) }
