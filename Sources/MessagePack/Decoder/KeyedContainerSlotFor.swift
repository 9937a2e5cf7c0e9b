#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A `KeyedContainerSlot` holding the container itself, whose type names `Key`.
final class KeyedContainerSlotFor<Key: CodingKey>: KeyedContainerSlot {
    let container: KeyedDecodingContainer<Key>

    init(container: KeyedDecodingContainer<Key>, index: KeyIndex) {
        self.container = container
        super.init(keyType: ObjectIdentifier(Key.self), index: index)
    }
}
