#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What went wrong with a file, for a person: the system's words for the errno under a Foundation file error (`No
/// such file or directory`), else the error's own description. Stands in for Foundation's `localizedDescription`,
/// which FoundationEssentials does not have; the caller names the file.
package func fileErrorText(_ error: any Error) -> String {
    if let posix = error as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
    if let cocoa = error as? CocoaError {
        if let posix = cocoa.underlying as? POSIXError {
            return String(cString: strerror(posix.code.rawValue))
        }
        return "\(cocoa.code)"
    }
    return "\(error)"
}
