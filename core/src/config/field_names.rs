//! The keys a section's type reads, as serde knows them (`field_names`),
//! so no list of a section's keys is kept by hand: the whole file's reader
//! refuses a key of a shared table that none of its readers names, and the
//! key tables of the docs are held to the same names.

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};

/// The keys of the struct `T` (a `#[derive(Deserialize)]` section):
/// every name it accepts, old names included. Empty for a type that is
/// not a struct.
pub fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut names));
    names
}

/// A deserializer that answers nothing: it only notes the field names a
/// struct asks for, then stops.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("field names only"))
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Two {
        a: u32,
        #[serde(rename = "bee")]
        b: Option<String>,
    }

    #[test]
    fn a_structs_keys_are_its_serde_names() {
        assert_eq!(field_names::<Two>(), ["a", "bee"]);
        assert!(field_names::<u32>().is_empty());
    }
}
